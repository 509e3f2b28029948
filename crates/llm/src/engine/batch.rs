//! Batched decode: one new token for each of N sessions in one pass over the weights.
//!
//! The embedding, the norms and every `linear` run on an `[N, D]` batch, so each weight
//! matrix is read once for all the sessions (continuous batching); rope takes each row's
//! own position, and attention runs per sequence against that session's own KV cache,
//! each writing its row of the step arena's attention slot. The same code runs on every
//! backend.

use std::sync::Arc;

use tempra_autograd::{Var, no_grad};
use tempra_tensor::{BinaryOp, Tensor};

use crate::engine::forward::{
    attention_output, attention_params, embed, ffn_block, output_logits, project_qkv,
};
use crate::engine::model::Model;
use crate::engine::outputs::Outputs;
use crate::engine::session::Session;
use crate::engine::step_arena::Slot;
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
    let _guard = no_grad();
    let executor = model.executor();
    let logits = executor.run(|out| {
        let logits = batch_forward(out, &model, sessions, tokens)?;
        Ok(executor.ctx().to_host(logits.tensor())?)
    })?;
    for (session, &token) in sessions.iter_mut().zip(tokens) {
        let (cache, history) = session.state_mut();
        cache.advance(1);
        history.push(token);
    }
    Ok(logits)
}

/// The batched step through the forward's blocks: one `[N, D]` pass for everything but
/// attention, which writes each session's row of the attention slot from its own cache.
fn batch_forward(
    out: &mut Outputs<'_>,
    model: &Model,
    sessions: &mut [&mut Session],
    tokens: &[u32],
) -> Result<Var> {
    let n = sessions.len();
    let config = model.config();
    let weights = model.forward_weights();
    // Positions from a stack buffer for batches up to 64 sessions (no heap per step).
    let mut stack = [0u32; 64];
    let mut heap = Vec::new();
    let positions: &mut [u32] = if n <= stack.len() {
        &mut stack[..n]
    } else {
        heap.resize(n, 0);
        &mut heap
    };
    for (p, s) in positions.iter_mut().zip(sessions.iter()) {
        *p = s.len() as u32;
    }
    let positions = out.ids(Slot::Positions, positions)?;
    let ids = out.ids(Slot::TokenIds, tokens)?;
    let mut x = embed(out, config, weights, &ids)?;
    drop(ids);
    let (hq, dv) = (config.head_count, config.value_length);
    for (l, layer) in weights.layers.iter().enumerate() {
        let (q, k, v) = project_qkv(out, config, weights, layer, l, &x, &positions)?;
        let attn = out.write_rows(Slot::Attention, &[n, hq, dv], n, |i, ctx, row| {
            let (cache, _) = sessions[i].state_mut();
            let start = cache.len();
            cache.write(
                ctx,
                l,
                &k.tensor().narrow(0, i, 1)?,
                &v.tensor().narrow(0, i, 1)?,
            )?;
            let (keys, values) = cache.view(l, 1)?;
            let q_i = q.tensor().narrow(0, i, 1)?;
            let params = attention_params(config, l, start);
            Ok(ctx.attention_into(&q_i, &keys, &values, &params, row)?)
        })?;
        drop((q, k, v));
        let attn = attention_output(out, config, layer, attn)?;
        x = out.assign(Slot::Hidden, BinaryOp::Add, x, &attn)?;
        drop(attn);
        let ffn = ffn_block(out, config, layer, &x)?;
        x = out.assign(Slot::Hidden, BinaryOp::Add, x, &ffn)?;
    }
    drop(positions);
    output_logits(out, config, weights, &x)
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
        // Both batched steps ran in the executor's arena (`first` was still held, so the
        // second step's logits got a fresh buffer).
        let stats = model.executor().arena_stats();
        assert_eq!((stats.pool_outputs, stats.replaced), (0, 1), "{stats:?}");
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
