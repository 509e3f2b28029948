//! Batched steps: several sessions advanced in one pass over the weights.
//!
//! Each session runs its own span of tokens: a decode row is a span of one, a chunk of a
//! prompt a longer span (a mixed step, so that decode never waits for a whole prefill).
//! The embedding, the norms and every `linear` run on the `[T, D]` concatenation of the
//! spans, so each weight matrix is read once for all of them (continuous batching); rope
//! takes each row's own position, and attention runs per span against that session's own
//! KV cache, each writing its rows of the step arena's attention slot. Only the last row
//! of each span reaches the output head. The same code runs on every backend, and the
//! engine's row invariance makes a row's values independent of what shares its step.

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
/// session alone.
///
/// Errors: no sessions, a token count different from the session count, and the errors
/// of [`step_spans`] (nothing is written in any of these cases).
pub fn step_batch(sessions: &mut [&mut Session], tokens: &[u32]) -> Result<Tensor> {
    if sessions.is_empty() || tokens.len() != sessions.len() {
        return Err(LlmError::Argument {
            what: format!(
                "a batched step needs one token per session ({} tokens for {} sessions)",
                tokens.len(),
                sessions.len()
            ),
        });
    }
    // The spans on the stack for batches up to 64 sessions (no heap per decode step).
    let mut stack: [&[u32]; 64] = [&[]; 64];
    let mut heap = Vec::new();
    let spans: &[&[u32]] = if tokens.len() <= stack.len() {
        for (span, token) in stack.iter_mut().zip(tokens) {
            *span = std::slice::from_ref(token);
        }
        &stack[..tokens.len()]
    } else {
        heap.extend(tokens.iter().map(std::slice::from_ref));
        &heap
    };
    step_spans(sessions, spans)
}

/// Runs `spans[i]` through `sessions[i]` for every `i` in one batched pass (a mixed
/// step: decode rows and prompt chunks together) and returns the logits of each span's
/// last token `[N, vocab]` (row `i` for session `i`). Each session advances by its
/// span's length, exactly as [`Session::prefill`] of that span would, and each row's
/// logits are bit-identical to that prefill's.
///
/// Errors: no sessions, a span count different from the session count, an empty span,
/// more tokens in all than the step arena's `max_batch_tokens`, sessions of different
/// models, a token outside the vocabulary, or a session without room for its span
/// (nothing is written in any of these cases).
pub fn step_spans(sessions: &mut [&mut Session], spans: &[&[u32]]) -> Result<Tensor> {
    step_spans_rows(sessions, spans, &[])
}

/// [`step_spans`], with the logits of every token of the spans `i` where `every_row[i]`
/// (a prompt scored for its log-probabilities; an empty `every_row`: none): the result
/// holds, span after span, every row of those spans and the last row of the others,
/// each bit-identical to what [`Session::logits_all`] of that span gives.
///
/// Errors: those of [`step_spans`], and an `every_row` neither empty nor one flag per
/// span.
pub fn step_spans_rows(
    sessions: &mut [&mut Session],
    spans: &[&[u32]],
    every_row: &[bool],
) -> Result<Tensor> {
    let n = sessions.len();
    if !every_row.is_empty() && every_row.len() != spans.len() {
        return Err(LlmError::Argument {
            what: format!(
                "a batched step needs one every-row flag per span ({} flags for {} spans)",
                every_row.len(),
                spans.len()
            ),
        });
    }
    if n == 0 || spans.len() != n {
        return Err(LlmError::Argument {
            what: format!(
                "a batched step needs one span of tokens per session ({} spans for {n} sessions)",
                spans.len()
            ),
        });
    }
    if let Some(i) = spans.iter().position(|s| s.is_empty()) {
        return Err(LlmError::Argument {
            what: format!("span {i} of the batched step has no tokens"),
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
    let total: usize = spans.iter().map(|s| s.len()).sum();
    let most = model.executor().arena_capacity().max_batch_tokens;
    if total > most {
        return Err(LlmError::Argument {
            what: format!(
                "a batched step holds at most {most} tokens (the step arena's rows); this one has {total}"
            ),
        });
    }
    let config = model.config();
    if let Some(&bad) = spans
        .iter()
        .flat_map(|s| s.iter())
        .find(|&&id| id as usize >= config.vocab_size)
    {
        return Err(LlmError::TokenId {
            id: bad as u64,
            n_vocab: config.vocab_size,
        });
    }
    if let Some((s, span)) = sessions
        .iter()
        .zip(spans)
        .find(|(s, span)| s.len() + span.len() > s.capacity())
    {
        return Err(LlmError::ContextFull {
            needed: s.len() + span.len(),
            capacity: s.capacity(),
        });
    }
    let _guard = no_grad();
    let executor = model.executor();
    let logits = executor.run(|out| {
        let logits = batch_forward(out, &model, sessions, spans, every_row, total)?;
        Ok(executor.ctx().to_host(logits.tensor())?)
    })?;
    for (session, span) in sessions.iter_mut().zip(spans) {
        let (cache, history) = session.state_mut();
        cache.advance(span.len());
        history.extend_from_slice(span);
    }
    Ok(logits)
}

/// The batched step through the forward's blocks: one `[T, D]` pass for everything but
/// attention, which writes each span's rows of the attention slot from its session's
/// cache; the output head runs on each span's last row (every row of the spans flagged
/// in `every_row`).
fn batch_forward(
    out: &mut Outputs<'_>,
    model: &Model,
    sessions: &mut [&mut Session],
    spans: &[&[u32]],
    every_row: &[bool],
    total: usize,
) -> Result<Var> {
    let n = sessions.len();
    let config = model.config();
    let weights = model.forward_weights();
    // Positions and token ids (then the spans' last rows) in one buffer, from the stack
    // for steps up to 64 tokens (no heap per decode step).
    let mut stack = [0u32; 64];
    let mut heap = Vec::new();
    let scratch: &mut [u32] = if total <= stack.len() {
        &mut stack[..total]
    } else {
        heap.resize(total, 0);
        &mut heap
    };
    let mut row = 0;
    for (s, span) in sessions.iter().zip(spans) {
        for (j, p) in scratch[row..row + span.len()].iter_mut().enumerate() {
            *p = (s.len() + j) as u32;
        }
        row += span.len();
    }
    let positions = out.ids(Slot::Positions, scratch)?;
    let mut row = 0;
    for span in spans {
        scratch[row..row + span.len()].copy_from_slice(span);
        row += span.len();
    }
    let ids = out.ids(Slot::TokenIds, scratch)?;
    let mut x = embed(out, config, weights, &ids)?;
    drop(ids);
    let (hq, dv) = (config.head_count, config.value_length);
    let mut lens = [0usize; 64];
    let mut lens_heap = Vec::new();
    let lens: &mut [usize] = if n <= lens.len() {
        &mut lens[..n]
    } else {
        lens_heap.resize(n, 0);
        &mut lens_heap
    };
    for (l, span) in lens.iter_mut().zip(spans) {
        *l = span.len();
    }
    for (l, layer) in weights.layers.iter().enumerate() {
        let (q, k, v) = project_qkv(out, config, weights, layer, l, &x, &positions)?;
        let attn = out.write_spans(
            Slot::Attention,
            &[total, hq, dv],
            lens,
            |i, at, ctx, rows| {
                let t = lens[i];
                let (cache, _) = sessions[i].state_mut();
                let start = cache.len();
                cache.write(
                    ctx,
                    l,
                    &k.tensor().narrow(0, at, t)?,
                    &v.tensor().narrow(0, at, t)?,
                )?;
                let (keys, values) = cache.view(l, t)?;
                let q_i = q.tensor().narrow(0, at, t)?;
                let params = attention_params(config, l, start);
                let sinks = layer.sinks.as_ref();
                Ok(ctx.attention_with_sinks_into(&q_i, &keys, &values, sinks, &params, rows)?)
            },
        )?;
        drop((q, k, v));
        let attn = attention_output(out, config, layer, attn)?;
        x = out.assign(Slot::Hidden, BinaryOp::Add, x, &attn)?;
        drop(attn);
        let ffn = ffn_block(out, config, layer, &x)?;
        x = out.assign(Slot::Hidden, BinaryOp::Add, x, &ffn)?;
    }
    drop(positions);
    let every = |i: usize| every_row.get(i).copied().unwrap_or(false);
    let picked: usize = (0..n).map(|i| if every(i) { lens[i] } else { 1 }).sum();
    if picked == total {
        return output_logits(out, config, weights, &x);
    }
    // Each span's last row (or all of them), picked as an embedding lookup of `x`'s rows.
    let (mut start, mut at) = (0, 0);
    for (i, &t) in lens.iter().enumerate() {
        let first = if every(i) { start } else { start + t - 1 };
        for r in first..start + t {
            scratch[at] = r as u32;
            at += 1;
        }
        start += t;
    }
    let last = out.ids(Slot::TokenIds, &scratch[..picked])?;
    let x = out.embedding(Slot::Norm, &x, &last)?;
    drop(last);
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

    /// A session of `model` per prompt, each holding its prompt.
    fn prefilled(model: &Arc<Model>, prompts: &[&[u32]]) -> Vec<Session> {
        prompts
            .iter()
            .map(|p| {
                let mut s = model.session().expect("session");
                s.prefill(p).expect("prefill");
                s
            })
            .collect()
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
        let mut sessions = prefilled(&model, &prompts);
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

    #[test]
    fn mixed_step_matches_prefill_of_each_span_and_bad_spans_are_errors() {
        let model = model();
        let prompts: [&[u32]; 3] = [&[1, 40, 41], &[1, 7], &[1, 50, 60, 70, 80]];
        let spans: [&[u32]; 3] = [&[9], &[11, 12, 13, 14, 15, 16], &[17, 18]];
        let mut alone = Vec::new();
        for (p, span) in prompts.iter().zip(&spans) {
            let mut s = model.session().expect("session");
            s.prefill(p).expect("prefill");
            let l = s.prefill(span).expect("span");
            alone.push((
                logits_slice(&l).expect("slice").to_vec(),
                s.tokens().to_vec(),
            ));
        }
        let mut sessions = prefilled(&model, &prompts);
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let mixed = step_spans(&mut refs, &spans).expect("mixed step");
        assert_eq!(mixed.dims(), &[3, 300]);
        for (i, (want, tokens)) in alone.iter().enumerate() {
            let got = row(&mixed, i);
            let same = got
                .iter()
                .zip(want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "span {i}: max difference {}", max_diff(&got, want));
            assert_eq!(sessions[i].tokens(), tokens.as_slice());
        }

        let (a, b) = sessions.split_at_mut(1);
        let err = step_spans(&mut [&mut a[0], &mut b[0]], &[&[1], &[]]).expect_err("empty");
        assert!(err.to_string().contains("span 1"), "{err}");
        // The arena holds 64 rows (the context): 65 tokens in all are refused.
        let long = vec![3u32; 60];
        let before = (a[0].len(), b[0].len());
        let err = step_spans(&mut [&mut a[0], &mut b[0]], &[&long, &[1, 2, 3, 4, 5]])
            .expect_err("too many tokens");
        assert!(err.to_string().contains("at most 64 tokens"), "{err}");
        assert_eq!((a[0].len(), b[0].len()), before);
    }

    #[test]
    fn a_scored_span_brings_every_row_as_logits_all_does() {
        let model = model();
        let prompts: [&[u32]; 3] = [&[1, 40, 41], &[1, 7], &[1, 50, 60]];
        let spans: [&[u32]; 3] = [&[9], &[11, 12, 13, 14, 15], &[17, 18]];
        let mut scored = model.session().expect("session");
        scored.prefill(prompts[1]).expect("prefill");
        let all = scored.logits_all(spans[1]).expect("logits_all");
        let mut last = Vec::new();
        for i in [0, 2] {
            let mut s = model.session().expect("session");
            s.prefill(prompts[i]).expect("prefill");
            last.push(
                logits_slice(&s.prefill(spans[i]).expect("span"))
                    .expect("slice")
                    .to_vec(),
            );
        }
        let mut sessions = prefilled(&model, &prompts);
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let mixed = step_spans_rows(&mut refs, &spans, &[false, true, false]).expect("step");
        // Span 0's last row, span 1's five rows, span 2's last row.
        assert_eq!(mixed.dims(), &[7, 300]);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&row(&mixed, 0)), bits(&last[0]));
        for r in 0..5 {
            assert_eq!(
                bits(&row(&mixed, 1 + r)),
                bits(&row(&all, r)),
                "scored row {r}"
            );
        }
        assert_eq!(bits(&row(&mixed, 6)), bits(&last[1]));
        let err = step_spans_rows(&mut refs, &spans, &[true]).expect_err("flags");
        assert!(err.to_string().contains("every-row flag"), "{err}");
    }
}
