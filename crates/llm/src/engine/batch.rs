//! Batched decode: one new token for each of N sessions in one pass over the weights.
//!
//! The embedding, the norms and every `linear` run on an `[N, D]` batch, so each weight
//! matrix is read once for all the sessions (continuous batching); rope takes each row's
//! own position, and attention runs per sequence against that session's own KV cache.

use std::sync::Arc;

use tempra_autograd::{Var, no_grad};
use tempra_tensor::Tensor;

use crate::engine::forward::{
    attention_output, attention_params, embed, ffn_block, output_logits, project_qkv,
};
use crate::engine::session::Session;
use crate::error::{LlmError, Result};

/// Runs `tokens[i]` through `sessions[i]` for every `i` in one batched pass and returns
/// the logits `[N, vocab]` (row `i` for session `i`). Each session advances by one
/// position, exactly as [`Session::step`] would, and the logits match stepping each
/// session alone (up to float summation order).
///
/// Errors: no sessions, a token count different from the session count, sessions of
/// different models, a token outside the vocabulary, or a full session (nothing is
/// written in any of these cases).
pub fn step_batch(sessions: &mut [&mut Session], tokens: &[u32]) -> Result<Tensor> {
    let n = sessions.len();
    if n == 0 || tokens.len() != n {
        return Err(LlmError::Argument {
            what: format!(
                "a batched step needs one token per session ({} tokens for {n} sessions)",
                tokens.len()
            ),
        });
    }
    let model = Arc::clone(sessions[0].model());
    if let Some(i) = sessions
        .iter()
        .position(|s| !Arc::ptr_eq(s.model(), &model))
    {
        return Err(LlmError::Argument {
            what: format!("session {i} of the batch runs a different model than session 0"),
        });
    }
    let config = model.config();
    if let Some(&bad) = tokens.iter().find(|&&id| id as usize >= config.vocab_size) {
        return Err(LlmError::TokenId {
            id: bad as u64,
            n_vocab: config.vocab_size,
        });
    }
    if let Some(s) = sessions.iter().find(|s| s.len() >= s.capacity()) {
        return Err(LlmError::ContextFull {
            needed: s.len() + 1,
            capacity: s.capacity(),
        });
    }
    if sessions.iter().any(|s| s.is_gpu()) {
        return step_each(sessions, tokens);
    }
    let _guard = no_grad();
    let ag = model.autograd();
    let ctx = ag.ctx();
    let weights = model.forward_weights();
    let starts: Vec<usize> = sessions.iter().map(|s| s.len()).collect();
    let positions: Vec<u32> = starts.iter().map(|&p| p as u32).collect();
    let positions = ctx.from_slice(&positions, &[n])?;
    let ids = ctx.from_slice(tokens, &[n])?;
    let mut x = embed(ag, config, weights, &ids)?;
    let mut rows: Vec<Var> = Vec::with_capacity(n);
    for (l, layer) in weights.layers.iter().enumerate() {
        let (q, k, v) = project_qkv(ag, config, weights, layer, l, &x, &positions)?;
        rows.clear();
        for (i, session) in sessions.iter_mut().enumerate() {
            let (cache, _) = session.state_mut();
            let k_i = k.tensor().narrow(0, i, 1)?;
            let v_i = v.tensor().narrow(0, i, 1)?;
            cache.write(ctx, l, &k_i, &v_i)?;
            let (keys, values) = cache.view(l, 1)?;
            let q_i = q.narrow(0, i, 1)?;
            let params = attention_params(config, l, starts[i]);
            rows.push(ag.attention(&q_i, &Var::constant(keys), &Var::constant(values), &params)?);
        }
        drop((q, k, v));
        let attn = if n == 1 {
            rows.pop().ok_or_else(|| LlmError::Argument {
                what: "empty batch".into(),
            })?
        } else {
            let parts: Vec<&Var> = rows.iter().collect();
            ag.concat(&parts, 0)?
        };
        rows.clear();
        let attn = attention_output(ag, config, layer, attn)?;
        x = ag.add_inplace(x, &attn)?;
        let ffn = ffn_block(ag, config, layer, &x)?;
        x = ag.add_inplace(x, &ffn)?;
    }
    for (session, &token) in sessions.iter_mut().zip(tokens) {
        let (cache, history) = session.state_mut();
        cache.advance(1);
        history.push(token);
    }
    Ok(output_logits(ag, config, weights, &x)?.into_tensor())
}

/// Steps each session alone and stacks the logits (sessions whose KV cache lives on a
/// device, which the host batch cannot write).
fn step_each(sessions: &mut [&mut Session], tokens: &[u32]) -> Result<Tensor> {
    let mut values: Vec<f32> = Vec::new();
    for (session, &token) in sessions.iter_mut().zip(tokens) {
        values.extend(session.step(token)?.to_vec_f32()?);
    }
    let vocab = values.len() / sessions.len();
    Ok(Tensor::owned_from_slice(&values, &[sessions.len(), vocab])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{LoadOptions, Model, logits_slice};
    use crate::testing::{ModelShape, RandomModelSpec, random_model};

    fn model() -> Arc<Model> {
        let shape = ModelShape::parse("dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300")
            .expect("shape");
        let file = random_model(&RandomModelSpec::llama(shape).with_seed(7)).expect("model");
        Model::from_file(
            file,
            &LoadOptions {
                threads: Some(1),
                context_length: Some(64),
                ..LoadOptions::default()
            },
        )
        .expect("load")
    }

    fn row(logits: &Tensor, i: usize) -> Vec<f32> {
        let r = logits.narrow(0, i, 1).expect("row");
        let r = r.squeeze(0).expect("squeeze");
        logits_slice(&r).expect("slice").to_vec()
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn batched_decode_matches_single_steps_at_different_lengths() {
        let model = model();
        let prompts: [&[u32]; 3] = [
            &[1, 40, 41, 42, 43, 44, 45],
            &[1, 300 - 1],
            &[1, 50, 60, 70],
        ];
        let next = [100u32, 101, 102];
        let then = [7u32, 8, 9];
        // Alone.
        let mut alone = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            let mut s = model.session().expect("session");
            s.prefill(p).expect("prefill");
            let a = logits_slice(&s.step(next[i]).expect("step"))
                .expect("slice")
                .to_vec();
            let b = logits_slice(&s.step(then[i]).expect("step"))
                .expect("slice")
                .to_vec();
            alone.push((a, b, s.tokens().to_vec()));
        }
        // Batched, twice in a row (the second step reads what the first wrote).
        let mut sessions: Vec<Session> = prompts
            .iter()
            .map(|p| {
                let mut s = model.session().expect("session");
                s.prefill(p).expect("prefill");
                s
            })
            .collect();
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let first = step_batch(&mut refs, &next).expect("batch");
        let second = step_batch(&mut refs, &then).expect("batch");
        assert_eq!(first.dims(), &[3, 300]);
        for (i, (a, b, tokens)) in alone.iter().enumerate() {
            let d1 = max_diff(&row(&first, i), a);
            let d2 = max_diff(&row(&second, i), b);
            assert!(
                d1 < 1e-4 && d2 < 1e-4,
                "session {i}: differences {d1}, {d2}"
            );
            assert_eq!(sessions[i].tokens(), tokens.as_slice());
            assert_eq!(sessions[i].len(), tokens.len());
        }
    }

    #[test]
    fn batch_of_one_matches_step_and_bad_batches_are_errors() {
        let model = model();
        let mut a = model.session().expect("session");
        let mut b = model.session().expect("session");
        a.prefill(&[1, 5, 6]).expect("prefill");
        b.prefill(&[1, 5, 6]).expect("prefill");
        let single = logits_slice(&a.step(9).expect("step"))
            .expect("slice")
            .to_vec();
        let batched = step_batch(&mut [&mut b], &[9]).expect("batch");
        assert!(max_diff(&row(&batched, 0), &single) < 1e-4);

        let err = step_batch(&mut [&mut a, &mut b], &[1]).expect_err("count");
        assert!(err.to_string().contains("one token per session"), "{err}");
        let err = step_batch(&mut [&mut a], &[300]).expect_err("id");
        assert!(matches!(err, LlmError::TokenId { id: 300, .. }), "{err}");
        let other = self::model();
        let mut c = other.session().expect("session");
        let err = step_batch(&mut [&mut a, &mut c], &[1, 1]).expect_err("models");
        assert!(err.to_string().contains("different model"), "{err}");
        // A full session refuses before anything is written.
        let mut full = model.session().expect("session");
        full.prefill(&vec![3; 64]).expect("prefill");
        let before = a.len();
        let err = step_batch(&mut [&mut a, &mut full], &[1, 1]).expect_err("full");
        assert!(matches!(err, LlmError::ContextFull { .. }), "{err}");
        assert_eq!(a.len(), before);
    }
}
