//! The GPU forward: the transformer of [`crate::engine::forward`] as GPU kernel calls
//! whose outputs are views of a [`BufferArena`]'s buffers, so a step allocates no device
//! memory (the backend recycles its parameter blocks and the rope kernel's small
//! frequency-table scratch lease; the host copy of the logits is the step's result).
//!
//! Kernels do not run in place (a buffer bound for reading and writing in one dispatch
//! is invalid), except the residual adds: the q/k norms and rope alternate between a
//! projection buffer and its scratch twin.

use tempra_backend_gpu::{ArenaBuffers, BufferArena, GpuBackend};
use tempra_tensor::{AttentionParams, Backend, BinaryOp, Tensor, UnaryOp};

use crate::engine::forward::LogitRows;
use crate::engine::gpu::engine::GpuEngine;
use crate::engine::gpu::weights::GpuLayerWeights;
use crate::error::{LlmError, Result};
use crate::model_config::{Arch, ModelConfig};

/// Runs `tokens` (at most `max_batch_tokens` of them) at positions `start..` through the
/// model, writing their keys and values into the arena's KV cache. Returns the logits of
/// `rows` on the host (`[1, V]` for [`LogitRows::Last`], `[T, V]` for [`LogitRows::All`],
/// which needs `T ≤ max_logit_rows`), or `None` when `rows` is `None` (a prompt chunk
/// before the last).
pub(crate) fn forward_chunk(
    engine: &GpuEngine,
    config: &ModelConfig,
    arena: &BufferArena,
    tokens: &[u32],
    start: usize,
    rows: Option<LogitRows>,
) -> Result<Option<Tensor>> {
    let t = tokens.len();
    let cap = *arena.capacity();
    let logit_rows = match rows {
        Some(LogitRows::All) => t,
        Some(LogitRows::Last) => 1,
        None => 0,
    };
    if t == 0 || t > cap.max_batch_tokens || logit_rows > cap.max_logit_rows {
        return Err(LlmError::Argument {
            what: format!(
                "a GPU step of {t} tokens and {logit_rows} logit rows (the arena holds {} and {})",
                cap.max_batch_tokens, cap.max_logit_rows
            ),
        });
    }
    if start + t > cap.max_seq_len {
        return Err(LlmError::ContextFull {
            needed: start + t,
            capacity: cap.max_seq_len,
        });
    }
    if let Some(&bad) = tokens.iter().find(|&&id| id as usize >= config.vocab_size) {
        return Err(LlmError::TokenId {
            id: bad as u64,
            n_vocab: config.vocab_size,
        });
    }
    let gpu = engine.backend();
    let w = engine.weights();
    let b = arena.buffers()?;
    let rows_of = |x: &Tensor, n: usize| x.narrow(0, 0, n);

    let mut ids = rows_of(&b.token_ids, t)?;
    Backend::upload(gpu, bytemuck::cast_slice(tokens), &mut ids)?;
    let positions: Vec<u32> = (start..start + t).map(|p| p as u32).collect();
    let mut pos = rows_of(&b.positions, t)?;
    Backend::upload(gpu, bytemuck::cast_slice(&positions), &mut pos)?;

    let mut hidden = rows_of(&b.hidden, t)?;
    if matches!(config.arch, Arch::Gemma2 | Arch::Gemma3) {
        let mut emb = rows_of(&b.norm, t)?;
        gpu.embedding(&w.token_embd, &ids, &mut emb)?;
        let scale = (config.embedding_length as f64).sqrt();
        gpu.binary_scalar(BinaryOp::Mul, &emb, scale, &mut hidden)?;
    } else {
        gpu.embedding(&w.token_embd, &ids, &mut hidden)?;
    }
    for (l, layer) in w.layers.iter().enumerate() {
        attention_block(engine, config, b, layer, l, &mut hidden, &pos, start, t)?;
        ffn_block(gpu, config, b, layer, &mut hidden, t)?;
    }
    let Some(rows) = rows else {
        // Nothing to read back: submit the recorded work so the GPU starts on it.
        gpu.flush()?;
        return Ok(None);
    };
    let x = match rows {
        LogitRows::Last => hidden.narrow(0, t - 1, 1)?,
        LogitRows::All => hidden,
    };
    let eps = config.rms_norm_eps as f64;
    let mut normed = rows_of(&b.norm, logit_rows)?;
    gpu.rms_norm(&x, &w.output_norm, eps, &mut normed)?;
    let mut logits = rows_of(&b.logits, logit_rows)?;
    gpu.linear(&normed, w.head(), None, &mut logits)?;
    if let Some(cap) = config.final_logit_softcap {
        let cap = cap as f64;
        let mut scratch = rows_of(&b.logits_scratch, logit_rows)?;
        gpu.binary_scalar(BinaryOp::Mul, &logits, 1.0 / cap, &mut scratch)?;
        gpu.unary(UnaryOp::Tanh, &scratch, &mut logits)?;
        gpu.binary_scalar(BinaryOp::Mul, &logits, cap, &mut scratch)?;
        logits = scratch;
    }
    Ok(Some(gpu.to_host(&logits)?))
}

/// Norm, q/k/v projections, optional q/k norms, rope, KV cache write, attention, output
/// projection, optional post-norm and the residual add into `hidden`.
#[allow(clippy::too_many_arguments)]
fn attention_block(
    engine: &GpuEngine,
    config: &ModelConfig,
    b: &ArenaBuffers,
    layer: &GpuLayerWeights,
    l: usize,
    hidden: &mut Tensor,
    positions: &Tensor,
    start: usize,
    t: usize,
) -> Result<()> {
    let gpu = engine.backend();
    let eps = config.rms_norm_eps as f64;
    let (hq, hkv) = (config.head_count, config.head_count_kv);
    let (dk, dv) = (config.key_length, config.value_length);
    let rows = |x: &Tensor| x.narrow(0, 0, t);
    let heads = |x: &Tensor, h: usize, d: usize| x.narrow(0, 0, t)?.reshape(&[t, h, d]);

    let mut normed = rows(&b.norm)?;
    gpu.rms_norm(hidden, &layer.attn_norm, eps, &mut normed)?;
    gpu.linear(&normed, &layer.wq, layer.bq.as_ref(), &mut rows(&b.q)?)?;
    gpu.linear(&normed, &layer.wk, layer.bk.as_ref(), &mut rows(&b.k)?)?;
    gpu.linear(&normed, &layer.wv, layer.bv.as_ref(), &mut rows(&b.v)?)?;

    let rope = config.rope_config(l)?;
    let freqs = engine.weights().rope_freqs.as_ref();
    // Optional per-head norm, then rope: each from one buffer of the pair into the other.
    let q = {
        let (mut src, mut dst) = (heads(&b.q, hq, dk)?, heads(&b.q_scratch, hq, dk)?);
        if let Some(qn) = &layer.q_norm {
            gpu.rms_norm(&src, qn, eps, &mut dst)?;
            std::mem::swap(&mut src, &mut dst);
        }
        gpu.rope(&src, positions, &rope, freqs, false, &mut dst)?;
        dst
    };
    let k = {
        let (mut src, mut dst) = (heads(&b.k, hkv, dk)?, heads(&b.k_scratch, hkv, dk)?);
        if let Some(kn) = &layer.k_norm {
            gpu.rms_norm(&src, kn, eps, &mut dst)?;
            std::mem::swap(&mut src, &mut dst);
        }
        gpu.rope(&src, positions, &rope, freqs, false, &mut dst)?;
        dst
    };
    let (keys, values) = (&b.keys[l], &b.values[l]);
    gpu.copy(&k, &mut keys.narrow(0, start, t)?)?;
    gpu.copy(&heads(&b.v, hkv, dv)?, &mut values.narrow(0, start, t)?)?;
    let params = AttentionParams {
        scale: config.attention_scale,
        q_start: start,
        window: if config.is_sliding_layer(l) {
            config.sliding_window
        } else {
            None
        },
        softcap: config.attn_logit_softcap,
    };
    let mut attn = heads(&b.attention, hq, dv)?;
    gpu.attention(
        &q,
        &keys.narrow(0, 0, start + t)?,
        &values.narrow(0, 0, start + t)?,
        &params,
        &mut attn,
    )?;
    let mut out = rows(&b.attn_out)?;
    gpu.linear(&rows(&b.attention)?, &layer.wo, None, &mut out)?;
    residual_add(
        gpu,
        layer.post_attn_norm.as_ref(),
        eps,
        &out,
        &mut normed,
        hidden,
    )
}

/// Norm, gated MLP (SwiGLU, or GeGLU with tanh-GELU for Gemma), optional post-norm and
/// the residual add into `hidden`.
fn ffn_block(
    gpu: &GpuBackend,
    config: &ModelConfig,
    b: &ArenaBuffers,
    layer: &GpuLayerWeights,
    hidden: &mut Tensor,
    t: usize,
) -> Result<()> {
    let eps = config.rms_norm_eps as f64;
    let rows = |x: &Tensor| x.narrow(0, 0, t);
    let mut normed = rows(&b.norm)?;
    gpu.rms_norm(hidden, &layer.ffn_norm, eps, &mut normed)?;
    let (mut gate, mut up) = (rows(&b.ffn_gate)?, rows(&b.ffn_up)?);
    gpu.linear(&normed, &layer.gate, None, &mut gate)?;
    gpu.linear(&normed, &layer.up, None, &mut up)?;
    let act = match config.arch {
        Arch::Gemma2 | Arch::Gemma3 => UnaryOp::GeluTanh,
        _ => UnaryOp::Silu,
    };
    let mut gated = rows(&b.ffn_act)?;
    gpu.unary(act, &gate, &mut gated)?;
    gpu.binary_inplace(BinaryOp::Mul, &mut gated, &up)?;
    let mut out = rows(&b.ffn_down)?;
    gpu.linear(&gated, &layer.down, None, &mut out)?;
    residual_add(
        gpu,
        layer.post_ffn_norm.as_ref(),
        eps,
        &out,
        &mut normed,
        hidden,
    )
}

/// `hidden += branch`, or `hidden += rms_norm(branch)` (into `scratch`) with a post-norm.
fn residual_add(
    gpu: &GpuBackend,
    post_norm: Option<&Tensor>,
    eps: f64,
    branch: &Tensor,
    scratch: &mut Tensor,
    hidden: &mut Tensor,
) -> Result<()> {
    match post_norm {
        Some(w) => {
            gpu.rms_norm(branch, w, eps, scratch)?;
            gpu.binary_inplace(BinaryOp::Add, hidden, scratch)?;
        }
        None => gpu.binary_inplace(BinaryOp::Add, hidden, branch)?,
    }
    Ok(())
}
