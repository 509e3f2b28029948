//! The transformer forward, written once over [`Autograd`]'s `Var`s for every backend:
//! with constant weights and a KV cache it serves inference (each intermediate in its
//! slot of the executor's step arena, see [`crate::engine::outputs`]); with variable
//! weights and no cache, the same code trains (outputs from the pool, on the tape).

use tempra_autograd::{Autograd, Var};
use tempra_tensor::{AttentionParams, BinaryOp, Tensor, UnaryOp};

use crate::engine::kv_cache::KvCache;
use crate::engine::outputs::Outputs;
use crate::engine::step_arena::{Slot, StepArena};
use crate::engine::weights::{
    DenseFfn, EncoderWeights, ExpertFfn, FeedForward, LayerWeights, ModelWeights,
};
use crate::error::{LlmError, Result};
use crate::model_config::{ClampedSwiglu, ExpertGating, ModelConfig};

/// Which positions' logits a forward computes (only the needed rows go through the
/// output head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows {
    /// The last position only (prefill and decode).
    Last,
    /// Every position (training, perplexity, `tempra logits`).
    All,
    /// No logits: every position's hidden state after the output norm `[T, D]`
    /// (embeddings), from the pool.
    Hidden,
}

/// Runs `tokens` through the model at positions `cache.len()..` (or `0..` without a
/// cache) and returns logits `[rows, vocab]`. With a cache, the new keys and values are
/// written into it and it advances by `tokens.len()`. Outputs come from the backend's
/// pool (or the tape, for inputs that require grad); sessions run the same forward with
/// their executor's step arena.
pub fn forward(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    tokens: &[u32],
    cache: Option<&mut KvCache>,
    rows: LogitRows,
) -> Result<Var> {
    let mut outputs = Outputs::pool(ag);
    let logits = forward_step(&mut outputs, config, weights, tokens, cache, Some(rows))?;
    logits.ok_or_else(|| LlmError::Argument {
        what: "the forward computed no logits".into(),
    })
}

/// [`forward`] with every intermediate that is not on the tape in its slot of `arena`
/// (what a session's step runs): the logits view the arena's logits slot, so drop them
/// before the next step (a view still held then costs that slot a fresh buffer).
pub fn forward_in(
    arena: &mut StepArena,
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    tokens: &[u32],
    cache: Option<&mut KvCache>,
    rows: LogitRows,
) -> Result<Var> {
    let mut outputs = Outputs::arena(ag, arena);
    let logits = forward_step(&mut outputs, config, weights, tokens, cache, Some(rows))?;
    logits.ok_or_else(|| LlmError::Argument {
        what: "the forward computed no logits".into(),
    })
}

/// The forward over an output plan: `rows` `None` skips the output head (a prompt chunk
/// before the last).
pub(crate) fn forward_step(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    weights: &ModelWeights,
    tokens: &[u32],
    mut cache: Option<&mut KvCache>,
    rows: Option<LogitRows>,
) -> Result<Option<Var>> {
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
    let ids = out.ids(Slot::TokenIds, tokens)?;
    let positions = position_ids(out, start, t)?;
    if let Some(encoder) = &weights.encoder {
        return encoder_forward(
            out, config, weights, encoder, &ids, &positions, start, cache, rows,
        );
    }

    let mut x = embed(out, config, weights, &ids)?;
    drop(ids);
    for (l, layer) in weights.layers.iter().enumerate() {
        let attn = attention_block(
            out,
            config,
            weights,
            layer,
            l,
            &x,
            &positions,
            start,
            cache.as_deref_mut(),
        )?;
        x = out.assign(Slot::Hidden, BinaryOp::Add, x, &attn)?;
        drop(attn);
        let ffn = ffn_block(out, config, layer, &x)?;
        x = out.assign(Slot::Hidden, BinaryOp::Add, x, &ffn)?;
    }
    if let Some(c) = cache {
        c.advance(t);
    }
    let Some(rows) = rows else {
        return Ok(None);
    };
    if rows == LogitRows::Hidden {
        let mut kept = out.pool_plan();
        return kept
            .rms_norm(
                Slot::OutputNorm,
                &x,
                output_norm(config, weights)?,
                config.rms_norm_eps as f64,
            )
            .map(Some);
    }
    if rows == LogitRows::Last {
        if t > 1 {
            x = x.narrow(0, t - 1, 1)?;
        }
        return output_logits(out, config, weights, &x).map(Some);
    }
    // Every position's logits (scoring a sequence) are the caller's to keep: a `[T, V]`
    // output from the pool, not the arena's logit rows.
    output_logits(&mut out.pool_plan(), config, weights, &x).map(Some)
}

/// Final norm, output head, optional logit scale (a divisor) and soft-cap of
/// `x [rows, D]` → `[rows, V]`.
pub(crate) fn output_logits(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    weights: &ModelWeights,
    x: &Var,
) -> Result<Var> {
    let x = out.rms_norm(
        Slot::OutputNorm,
        x,
        output_norm(config, weights)?,
        config.rms_norm_eps as f64,
    )?;
    let logits = out.linear(Slot::Logits, &x, weights.head(), None)?;
    drop(x);
    let divisor = config.logit_scale.map_or(1.0, f64::from);
    let Some(cap) = config.final_logit_softcap else {
        return match config.logit_scale {
            Some(_) => out.mul_scalar(Slot::LogitsScratch, &logits, 1.0 / divisor),
            None => Ok(logits),
        };
    };
    let cap = cap as f64;
    let scaled = out.mul_scalar(Slot::LogitsScratch, &logits, 1.0 / (divisor * cap))?;
    drop(logits);
    let squashed = out.unary(Slot::Logits, UnaryOp::Tanh, &scaled)?;
    drop(scaled);
    out.mul_scalar(Slot::LogitsScratch, &squashed, cap)
}

/// The final norm, or [`no_logits`] for an encoder (it has neither that norm nor an
/// output head).
fn output_norm<'w>(config: &ModelConfig, weights: &'w ModelWeights) -> Result<&'w Var> {
    weights
        .output_norm
        .as_ref()
        .ok_or_else(|| no_logits(config))
}

/// The error of asking an encoder for logits.
fn no_logits(config: &ModelConfig) -> LlmError {
    LlmError::Argument {
        what: format!(
            "{} is an encoder: it makes embeddings, not logits",
            config.arch
        ),
    }
}

/// An encoder's forward (BERT): token, position and type-0 embeddings summed and
/// layer-normed, then per block attention over every token (q/k/v with biases, no
/// rope), the output projection added to the residual and layer-normed, and a GELU FFN
/// with biases added and layer-normed. With `rows` `Hidden`, the last block's output
/// `[T, D]` (from the pool); `None` computes nothing to return; logits are an error.
/// The keys and values go through `cache` when one is given (the whole input must
/// then be one step: later tokens change earlier ones).
#[allow(clippy::too_many_arguments)]
fn encoder_forward(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    weights: &ModelWeights,
    encoder: &EncoderWeights,
    ids: &Tensor,
    positions: &Tensor,
    start: usize,
    mut cache: Option<&mut KvCache>,
    rows: Option<LogitRows>,
) -> Result<Option<Var>> {
    if matches!(rows, Some(LogitRows::Last | LogitRows::All)) {
        return Err(no_logits(config));
    }
    let t = ids.elem_count();
    if start != 0 {
        return Err(LlmError::Argument {
            what: format!(
                "{} is an encoder: its input runs in one step from position 0",
                config.arch
            ),
        });
    }
    let eps = config.rms_norm_eps as f64;
    let tokens = out.embedding(Slot::Hidden, &weights.token_embd, ids)?;
    let places = out.embedding(Slot::AttentionOut, &encoder.position_embd, positions)?;
    let summed = out.assign(Slot::Hidden, BinaryOp::Add, tokens, &places)?;
    drop(places);
    let type_zero = Var::constant(encoder.token_types.tensor().narrow(0, 0, 1)?);
    let summed = out.assign(Slot::Hidden, BinaryOp::Add, summed, &type_zero)?;
    let (w, b) = &encoder.embd_norm;
    let mut x = out.layer_norm(Slot::Norm, &summed, w, b, eps)?;
    drop(summed);
    let last = weights.layers.len().saturating_sub(1);
    for (l, (layer, extra)) in weights.layers.iter().zip(&encoder.layers).enumerate() {
        let (q, k, v) = project_qkv(out, config, weights, layer, l, &x, positions)?;
        let params = AttentionParams {
            causal: false,
            ..attention_params(config, l, start)
        };
        let attn = attend(out, l, (q, k, v), None, &params, cache.as_deref_mut())?;
        let attn = attn.reshape(&[t, config.head_count * config.value_length])?;
        let projected = out.linear(Slot::AttentionOut, &attn, &layer.wo, Some(&extra.bo))?;
        drop(attn);
        let residual = out.assign(Slot::AttentionOut, BinaryOp::Add, projected, &x)?;
        drop(x);
        let (w, b) = &extra.attn_out_norm;
        let h = out.layer_norm(Slot::Hidden, &residual, w, b, eps)?;
        drop(residual);
        let ffn = layer.ffn.dense().ok_or_else(|| LlmError::Argument {
            what: format!("{}: an encoder block without its FFN", config.arch),
        })?;
        let up = out.linear(Slot::FfnUp, &h, &ffn.up, Some(&extra.up_bias))?;
        let act = config.arch.description().activation;
        let activated = out.unary(Slot::FfnAct, act, &up)?;
        drop(up);
        let down = out.linear(Slot::FfnDown, &activated, &ffn.down, Some(&extra.down_bias))?;
        drop(activated);
        let residual = out.assign(Slot::FfnDown, BinaryOp::Add, down, &h)?;
        drop(h);
        let (w, b) = &extra.layer_out_norm;
        x = if l == last && rows == Some(LogitRows::Hidden) {
            // The caller keeps the result: a pool output, not the arena's.
            out.pool_plan()
                .layer_norm(Slot::Norm, &residual, w, b, eps)?
        } else {
            out.layer_norm(Slot::Norm, &residual, w, b, eps)?
        };
    }
    if let Some(c) = cache {
        c.advance(t);
    }
    Ok(rows.map(|_| x))
}

/// Positions `start..start + t` as a U32 tensor `[t]` in the positions slot. Decode (and
/// short prompts) fill them from a stack buffer: no heap allocation per token.
pub(crate) fn position_ids(out: &mut Outputs<'_>, start: usize, t: usize) -> Result<Tensor> {
    let mut stack = [0u32; 64];
    let ids = |buf: &mut [u32]| {
        for (i, p) in buf.iter_mut().enumerate() {
            *p = (start + i) as u32;
        }
    };
    if t <= stack.len() {
        ids(&mut stack[..t]);
        return out.ids(Slot::Positions, &stack[..t]);
    }
    let mut heap = vec![0u32; t];
    ids(&mut heap);
    out.ids(Slot::Positions, &heap)
}

/// The token embedding of `ids [T]` → `[T, D]` in the hidden slot (times the model's
/// embedding scale, where it has one).
pub(crate) fn embed(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    weights: &ModelWeights,
    ids: &Tensor,
) -> Result<Var> {
    let Some(scale) = config.embedding_scale else {
        return out.embedding(Slot::Hidden, &weights.token_embd, ids);
    };
    let x = out.embedding(Slot::Embedding, &weights.token_embd, ids)?;
    out.mul_scalar(Slot::Hidden, &x, scale as f64)
}

/// Norm, q/k/v projections, optional q/k norms, rope, cache write, attention, output
/// projection and optional post-norm: the residual branch of the attention half.
fn attention_block(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    weights: &ModelWeights,
    layer: &LayerWeights,
    l: usize,
    x: &Var,
    positions: &Tensor,
    start: usize,
    cache: Option<&mut KvCache>,
) -> Result<Var> {
    let qkv = project_qkv(out, config, weights, layer, l, x, positions)?;
    let params = attention_params(config, l, start);
    let attn = attend(out, l, qkv, layer.sinks.as_ref(), &params, cache)?;
    attention_output(out, config, layer, attn)
}

/// Layer `l`'s attention of `q` over `k` and `v` (`[T, H, D]` each), with the layer's
/// `sinks` where it has them: with a cache, the new keys and values are written into it
/// and the queries read the cached view of every position so far.
fn attend(
    out: &mut Outputs<'_>,
    l: usize,
    (q, k, v): (Var, Var, Var),
    sinks: Option<&Tensor>,
    params: &AttentionParams,
    cache: Option<&mut KvCache>,
) -> Result<Var> {
    let Some(cache) = cache else {
        return out.attention(Slot::Attention, (&q, &k, &v), sinks, params);
    };
    let t = q.dims()[0];
    cache.write(out.ctx(), l, k.tensor(), v.tensor())?;
    drop((k, v));
    let (keys, values) = cache.view(l, t)?;
    let (keys, values) = (Var::constant(keys), Var::constant(values));
    out.attention(Slot::Attention, (&q, &keys, &values), sinks, params)
}

/// Optional pre-norm, q/k/v projections, optional q/k norms and rope (on the layers that
/// have it) of `x [T, D]` at `positions [T]`: `q [T, Hq, Dk]`, `k [T, Hkv, Dk]`,
/// `v [T, Hkv, Dv]`.
pub(crate) fn project_qkv(
    out: &mut Outputs<'_>,
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
    let h = pre_norm(out, x, layer.attn_norm.as_ref(), eps)?;
    let q = out.linear(Slot::Q, &h, &layer.wq, layer.bq.as_ref())?;
    let k = out.linear(Slot::K, &h, &layer.wk, layer.bk.as_ref())?;
    let v = out
        .linear(Slot::V, &h, &layer.wv, layer.bv.as_ref())?
        .reshape(&[t, hkv, dv])?;
    drop(h);
    let mut norm = |slot, x, w: &Option<Var>, heads| qk_norm(out, slot, x, w.as_ref(), eps, heads);
    let q = norm(Slot::QNormed, q, &layer.q_norm, [t, hq, dk])?;
    let k = norm(Slot::KNormed, k, &layer.k_norm, [t, hkv, dk])?;
    if !config.uses_rope(l) {
        return Ok((q, k, v));
    }
    let rope = config.rope_config(l);
    let freqs = weights.rope_freqs.as_ref();
    let q = out.rope(Slot::QRoped, &q, positions, &rope, freqs)?;
    let k = out.rope(Slot::KRoped, &k, positions, &rope, freqs)?;
    Ok((q, k, v))
}

/// `x` RMS-normed by a block's pre-norm into the norm slot, or `x` itself where the
/// architecture has none.
fn pre_norm(out: &mut Outputs<'_>, x: &Var, norm: Option<&Var>, eps: f64) -> Result<Var> {
    match norm {
        Some(norm) => out.rms_norm(Slot::Norm, x, norm, eps),
        None => Ok(x.clone()),
    }
}

/// The projection `x [T, H·Dk]` as heads `[T, H, Dk]`, RMS-normed by `norm` where the
/// layer has one: per head for a `[Dk]` norm, over the whole projection for an
/// `[H·Dk]` one (OLMo 2).
fn qk_norm(
    out: &mut Outputs<'_>,
    slot: Slot,
    x: Var,
    norm: Option<&Var>,
    eps: f64,
    heads: [usize; 3],
) -> Result<Var> {
    match norm {
        None => Ok(x.reshape(&heads)?),
        Some(n) if n.dims() == [heads[2]] => Ok(out.rms_norm(slot, &x.reshape(&heads)?, n, eps)?),
        Some(n) => Ok(out.rms_norm(slot, &x, n, eps)?.reshape(&heads)?),
    }
}

/// Layer `l`'s attention settings for queries starting at position `start`.
pub(crate) fn attention_params(config: &ModelConfig, l: usize, start: usize) -> AttentionParams {
    AttentionParams {
        causal: true,
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

/// Output projection, optional post-norm and residual scale of the attention result
/// `[T, Hq, Dv]`.
pub(crate) fn attention_output(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    layer: &LayerWeights,
    attn: Var,
) -> Result<Var> {
    let t = attn.dims()[0];
    let attn = attn.reshape(&[t, config.head_count * config.value_length])?;
    let projected = out.linear(Slot::AttentionOut, &attn, &layer.wo, layer.bo.as_ref())?;
    drop(attn);
    let branch = match &layer.post_attn_norm {
        Some(post) => out.rms_norm(
            Slot::AttentionPostNorm,
            &projected,
            post,
            config.rms_norm_eps as f64,
        )?,
        None => projected,
    };
    residual_scaled(out, config, branch)
}

/// A block branch times the model's residual scale, where it has one (Granite).
fn residual_scaled(out: &mut Outputs<'_>, config: &ModelConfig, branch: Var) -> Result<Var> {
    match config.residual_scale {
        Some(scale) => out.mul_scalar(Slot::ResidualScaled, &branch, scale as f64),
        None => Ok(branch),
    }
}

/// Optional pre-norm, the FFN (gated MLP or mixture of experts), optional post-norm and
/// residual scale.
pub(crate) fn ffn_block(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    layer: &LayerWeights,
    x: &Var,
) -> Result<Var> {
    let eps = config.rms_norm_eps as f64;
    let h = pre_norm(out, x, layer.ffn_norm.as_ref(), eps)?;
    let down = match &layer.ffn {
        FeedForward::Dense(ffn) => gated_mlp(out, config, ffn, &h, Slot::FfnDown)?,
        FeedForward::Experts(experts) => expert_ffn(out, config, experts, &h)?,
    };
    drop(h);
    let branch = match &layer.post_ffn_norm {
        Some(post) => out.rms_norm(Slot::FfnPostNorm, &down, post, eps)?,
        None => down,
    };
    residual_scaled(out, config, branch)
}

/// The gated MLP `down(act(gate·h) ⊙ up·h)` of `h [T, D]`, its result in `result`.
fn gated_mlp(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    ffn: &DenseFfn,
    h: &Var,
    result: Slot,
) -> Result<Var> {
    let gate_weight = ffn.gate.as_ref().ok_or_else(|| LlmError::Argument {
        what: format!("{}: a block without an FFN gate", config.arch),
    })?;
    let gate = out.linear(Slot::FfnGate, h, gate_weight, None)?;
    let up = out.linear(Slot::FfnUp, h, &ffn.up, None)?;
    let act = config.arch.description().activation;
    let activated = out.unary(Slot::FfnAct, act, &gate)?;
    drop(gate);
    let gated = out.assign(Slot::FfnAct, BinaryOp::Mul, activated, &up)?;
    drop(up);
    out.linear(result, &gated, &ffn.down, None)
}

/// A mixture of experts on `h [T, D]`: the router's logits (plus its bias, where it
/// has one) gated (softmax or sigmoid over every expert, or a softmax over the chosen
/// experts' logits), each token's `k` best experts and their weights (renormalised and
/// scaled where the model says), the chosen experts' gated MLPs by grouped-expert
/// products (each expert's weights read once per step, whichever tokens chose it; their
/// biases added where the model has them), their outputs summed by weight, plus the
/// shared expert times its sigmoid gate where the model has one. The result `[T, D]` is
/// in the FFN down slot.
fn expert_ffn(
    out: &mut Outputs<'_>,
    config: &ModelConfig,
    experts: &ExpertFfn,
    h: &Var,
) -> Result<Var> {
    let moe = config.moe.as_ref().ok_or_else(|| LlmError::Argument {
        what: format!(
            "{}: expert weights without a mixture-of-experts config",
            config.arch
        ),
    })?;
    let t = h.dims()[0];
    let biases = experts.biases.as_ref();
    let logits = out.linear(
        Slot::RouterLogits,
        h,
        &experts.router,
        biases.map(|b| &b.router),
    )?;
    let (mut weights, ids) = match moe.gating {
        ExpertGating::SoftmaxChosen => {
            let (chosen, ids) = out.top_k(
                Slot::ExpertWeights,
                Slot::ExpertIds,
                &logits,
                moe.experts_used,
            )?;
            drop(logits);
            // The router-probabilities slot holds `[T, E]`: room for the `[T, k]` softmax.
            (out.softmax(Slot::RouterProbs, &chosen)?, ids)
        }
        ExpertGating::Softmax | ExpertGating::Sigmoid => {
            let gated = match moe.gating {
                ExpertGating::Sigmoid => out.unary(Slot::RouterProbs, UnaryOp::Sigmoid, &logits)?,
                _ => out.softmax(Slot::RouterProbs, &logits)?,
            };
            drop(logits);
            out.top_k(
                Slot::ExpertWeights,
                Slot::ExpertIds,
                &gated,
                moe.experts_used,
            )?
        }
    };
    if moe.normalize_weights {
        let sum = out.sum_last(Slot::ExpertWeightSum, &weights)?;
        weights = out.assign(Slot::ExpertWeights, BinaryOp::Div, weights, &sum)?;
    }
    if let Some(scale) = moe.weights_scale {
        weights = out.mul_scalar(Slot::ExpertWeightsScaled, &weights, scale as f64)?;
    }
    let rows = h.reshape(&[t, 1, config.embedding_length])?;
    let gate = out.expert_linear(
        Slot::ExpertGate,
        &rows,
        &experts.gate,
        &ids,
        biases.map(|b| &b.gate),
    )?;
    let up = out.expert_linear(
        Slot::ExpertUp,
        &rows,
        &experts.up,
        &ids,
        biases.map(|b| &b.up),
    )?;
    drop(rows);
    let product = match config.arch.description().clamped_swiglu {
        Some(clamp) => clamped_swiglu(out, clamp, gate, up)?,
        None => {
            let act = config.arch.description().activation;
            let activated = out.unary(Slot::ExpertAct, act, &gate)?;
            drop(gate);
            let product = out.assign(Slot::ExpertAct, BinaryOp::Mul, activated, &up)?;
            drop(up);
            product
        }
    };
    let down = out.expert_linear(
        Slot::ExpertDown,
        &product,
        &experts.down,
        &ids,
        biases.map(|b| &b.down),
    )?;
    drop((product, ids));
    let mixed = out.weighted_sum(Slot::FfnDown, &down, &weights)?;
    drop((down, weights));
    let Some(shared) = &experts.shared else {
        return Ok(mixed);
    };
    let mut shared_out = gated_mlp(out, config, shared, h, Slot::SharedDown)?;
    if let Some(gate) = &experts.shared_gate {
        let logit = out.linear(Slot::SharedGateLogit, h, gate, None)?;
        let gate = out.unary(Slot::SharedGate, UnaryOp::Sigmoid, &logit)?;
        drop(logit);
        shared_out = out.assign(Slot::SharedDown, BinaryOp::Mul, shared_out, &gate)?;
    }
    out.assign(Slot::FfnDown, BinaryOp::Add, mixed, &shared_out)
}

/// gpt-oss's clamped SwiGLU of the experts' `gate` and `up` projections: `g' ·
/// sigmoid(alpha · g') · (u' + 1)` with `g' = min(g, limit)` and `u'` clamped to
/// `[-limit, limit]`, as `silu(alpha · g') · (u' + 1) / alpha`, in the expert slots (the
/// result in the activation slot).
fn clamped_swiglu(out: &mut Outputs<'_>, clamp: ClampedSwiglu, gate: Var, up: Var) -> Result<Var> {
    let (alpha, limit) = (clamp.alpha as f64, clamp.limit as f64);
    let clamped = out.scalar(Slot::ExpertClamped, BinaryOp::Minimum, &gate, limit)?;
    drop(gate);
    let sloped = out.mul_scalar(Slot::ExpertGate, &clamped, alpha)?;
    drop(clamped);
    let activated = out.unary(Slot::ExpertClamped, UnaryOp::Silu, &sloped)?;
    drop(sloped);
    let floor = out.scalar(Slot::ExpertAct, BinaryOp::Maximum, &up, -limit)?;
    drop(up);
    let clamped_up = out.scalar(Slot::ExpertUp, BinaryOp::Minimum, &floor, limit)?;
    drop(floor);
    let shifted = out.scalar(Slot::ExpertAct, BinaryOp::Add, &clamped_up, 1.0)?;
    drop(clamped_up);
    let product = out.assign(Slot::ExpertClamped, BinaryOp::Mul, activated, &shifted)?;
    drop(shifted);
    out.mul_scalar(Slot::ExpertAct, &product, 1.0 / alpha)
}
