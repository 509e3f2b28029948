//! The transformer forward, written once over [`Autograd`]'s `Var`s: with constant
//! weights and a KV cache it serves inference (transients return to the pool as soon as
//! they drop); with variable weights and no cache, the same code trains.

use tempra_autograd::{Autograd, Var};
use tempra_tensor::{AttentionParams, Tensor, UnaryOp};

use crate::engine::kv_cache::KvCache;
use crate::engine::weights::{LayerWeights, ModelWeights};
use crate::error::{LlmError, Result};
use crate::model_config::{Arch, ModelConfig};

/// Which positions' logits a forward computes (only the needed rows go through the
/// output head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows {
    /// The last position only (prefill and decode).
    Last,
    /// Every position (training, perplexity, `tempra logits`).
    All,
}

/// Runs `tokens` through the model at positions `cache.len()..` (or `0..` without a
/// cache) and returns logits `[rows, vocab]`. With a cache, the new keys and values are
/// written into it and it advances by `tokens.len()`.
pub fn forward(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    tokens: &[u32],
    mut cache: Option<&mut KvCache>,
    rows: LogitRows,
) -> Result<Var> {
    let ctx = ag.ctx();
    let t = tokens.len();
    if t == 0 {
        return Err(LlmError::Argument {
            what: "forward needs at least one token".into(),
        });
    }
    if let Some(&bad) = tokens.iter().find(|&&id| id as usize >= config.vocab_size) {
        return Err(LlmError::TokenId {
            id: bad as u64,
            n_vocab: config.vocab_size,
        });
    }
    let start = cache.as_ref().map_or(0, |c| c.len());
    if let Some(c) = cache.as_ref()
        && start + t > c.capacity()
    {
        return Err(LlmError::ContextFull {
            needed: start + t,
            capacity: c.capacity(),
        });
    }
    let ids = ctx.from_slice(tokens, &[t])?;
    let positions = position_ids(ag, start, t)?;

    let mut x = embed(ag, config, weights, &ids)?;
    for (l, layer) in weights.layers.iter().enumerate() {
        let attn = attention_block(
            ag,
            config,
            weights,
            layer,
            l,
            &x,
            &positions,
            start,
            cache.as_deref_mut(),
        )?;
        x = ag.add_inplace(x, &attn)?;
        let ffn = ffn_block(ag, config, layer, &x)?;
        x = ag.add_inplace(x, &ffn)?;
    }
    if let Some(c) = cache {
        c.advance(t);
    }
    if rows == LogitRows::Last && t > 1 {
        x = x.narrow(0, t - 1, 1)?;
    }
    output_logits(ag, config, weights, &x)
}

/// Final norm, output head and optional logit soft-cap of `x [rows, D]` → `[rows, V]`.
pub(crate) fn output_logits(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    x: &Var,
) -> Result<Var> {
    let x = ag.rms_norm(x, &weights.output_norm, config.rms_norm_eps as f64)?;
    let mut logits = ag.linear(&x, weights.head(), None)?;
    if let Some(cap) = config.final_logit_softcap {
        let cap = cap as f64;
        logits = ag.mul_scalar(&ag.tanh(&ag.mul_scalar(&logits, 1.0 / cap)?)?, cap)?;
    }
    Ok(logits)
}

/// Positions `start..start + t` as a U32 tensor `[t]`. Decode (and short prompts) fill
/// them from a stack buffer: no heap allocation per token.
fn position_ids(ag: &Autograd, start: usize, t: usize) -> Result<Tensor> {
    let mut stack = [0u32; 64];
    let ids = |buf: &mut [u32]| {
        for (i, p) in buf.iter_mut().enumerate() {
            *p = (start + i) as u32;
        }
    };
    if t <= stack.len() {
        ids(&mut stack[..t]);
        return Ok(ag.ctx().from_slice(&stack[..t], &[t])?);
    }
    let mut heap = vec![0u32; t];
    ids(&mut heap);
    Ok(ag.ctx().from_slice(&heap, &[t])?)
}

/// The token embedding of `ids [T]` → `[T, D]` (scaled by √D for Gemma).
pub(crate) fn embed(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    ids: &Tensor,
) -> Result<Var> {
    let x = ag.embedding(&weights.token_embd, ids)?;
    if matches!(config.arch, Arch::Gemma2 | Arch::Gemma3) {
        return Ok(ag.mul_scalar(&x, (config.embedding_length as f64).sqrt())?);
    }
    Ok(x)
}

/// Norm, q/k/v projections, optional q/k norms, rope, cache write, attention, output
/// projection and optional post-norm: the residual branch of the attention half.
#[allow(clippy::too_many_arguments)]
fn attention_block(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    layer: &LayerWeights,
    l: usize,
    x: &Var,
    positions: &Tensor,
    start: usize,
    cache: Option<&mut KvCache>,
) -> Result<Var> {
    let t = x.dims()[0];
    let (q, k, v) = project_qkv(ag, config, weights, layer, l, x, positions)?;
    let params = attention_params(config, l, start);
    let attn = match cache {
        Some(cache) => {
            cache.write(ag.ctx(), l, k.tensor(), v.tensor())?;
            drop((k, v));
            let (keys, values) = cache.view(l, t)?;
            ag.attention(&q, &Var::constant(keys), &Var::constant(values), &params)?
        }
        None => ag.attention(&q, &k, &v, &params)?,
    };
    attention_output(ag, config, layer, attn)
}

/// Norm, q/k/v projections, optional q/k norms and rope of `x [T, D]` at `positions [T]`:
/// `q [T, Hq, Dk]`, `k [T, Hkv, Dk]`, `v [T, Hkv, Dv]`.
pub(crate) fn project_qkv(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    layer: &LayerWeights,
    l: usize,
    x: &Var,
    positions: &Tensor,
) -> Result<(Var, Var, Var)> {
    let eps = config.rms_norm_eps as f64;
    let t = x.dims()[0];
    let (hq, hkv) = (config.head_count, config.head_count_kv);
    let (dk, dv) = (config.key_length, config.value_length);
    let h = ag.rms_norm(x, &layer.attn_norm, eps)?;
    let mut q = ag
        .linear(&h, &layer.wq, layer.bq.as_ref())?
        .reshape(&[t, hq, dk])?;
    let mut k = ag
        .linear(&h, &layer.wk, layer.bk.as_ref())?
        .reshape(&[t, hkv, dk])?;
    let v = ag
        .linear(&h, &layer.wv, layer.bv.as_ref())?
        .reshape(&[t, hkv, dv])?;
    drop(h);
    if let Some(qn) = &layer.q_norm {
        q = ag.rms_norm(&q, qn, eps)?;
    }
    if let Some(kn) = &layer.k_norm {
        k = ag.rms_norm(&k, kn, eps)?;
    }
    let rope = config.rope_config(l)?;
    let freqs = weights.rope_freqs.as_ref();
    let q = ag.rope(&q, positions, &rope, freqs)?;
    let k = ag.rope(&k, positions, &rope, freqs)?;
    Ok((q, k, v))
}

/// Layer `l`'s attention settings for queries starting at position `start`.
pub(crate) fn attention_params(config: &ModelConfig, l: usize, start: usize) -> AttentionParams {
    AttentionParams {
        scale: config.attention_scale,
        q_start: start,
        window: if config.is_sliding_layer(l) {
            config.sliding_window
        } else {
            None
        },
        softcap: config.attn_logit_softcap,
    }
}

/// Output projection and optional post-norm of the attention result `[T, Hq, Dv]`.
pub(crate) fn attention_output(
    ag: &Autograd,
    config: &ModelConfig,
    layer: &LayerWeights,
    attn: Var,
) -> Result<Var> {
    let t = attn.dims()[0];
    let attn = attn.reshape(&[t, config.head_count * config.value_length])?;
    let mut out = ag.linear(&attn, &layer.wo, None)?;
    if let Some(post) = &layer.post_attn_norm {
        out = ag.rms_norm(&out, post, config.rms_norm_eps as f64)?;
    }
    Ok(out)
}

/// Norm, gated MLP (SwiGLU, or GeGLU with tanh-GELU for Gemma) and optional post-norm.
pub(crate) fn ffn_block(
    ag: &Autograd,
    config: &ModelConfig,
    layer: &LayerWeights,
    x: &Var,
) -> Result<Var> {
    let eps = config.rms_norm_eps as f64;
    let h = ag.rms_norm(x, &layer.ffn_norm, eps)?;
    let gate = ag.linear(&h, &layer.gate, None)?;
    let up = ag.linear(&h, &layer.up, None)?;
    drop(h);
    let act = match config.arch {
        Arch::Gemma2 | Arch::Gemma3 => UnaryOp::GeluTanh,
        _ => UnaryOp::Silu,
    };
    let gated = ag.mul(&ag.unary(act, &gate)?, &up)?;
    drop((gate, up));
    let mut out = ag.linear(&gated, &layer.down, None)?;
    if let Some(post) = &layer.post_ffn_norm {
        out = ag.rms_norm(&out, post, eps)?;
    }
    Ok(out)
}
