//! `StepArena`: every intermediate of one transformer step, allocated once per executor
//! through the backend seam ([`tempra_tensor::Backend::allocate_persistent`]: host memory
//! on the CPU, device memory on the GPU) and reused by every step of every session.
//!
//! The forward names each intermediate by its [`Slot`]; in inference its output plan
//! ([`crate::engine::outputs`]) points the slot's buffer at the step's rows and shape
//! ([`Tensor::set_view`]) and the op writes there through an `*_into` variant of
//! [`ExecContext`]. A slot's buffer is held by the arena alone between steps, so it is a
//! valid output (see the output rule of [`tempra_tensor::Backend`]); should a caller
//! still hold a view of one (the logits of the previous step, say), the arena gives that
//! slot a fresh buffer instead of overwriting what the caller holds, and counts it
//! ([`ArenaStats::replaced`]).
//!
//! [`StepArena::release`] frees everything through an exhaustive destructuring of
//! [`ArenaBuffers`]: a slot added without being freed is a compile error.

use std::fmt;

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::error::{LlmError, Result};
use crate::model_config::ModelConfig;

/// How many rows a step arena holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaCapacity {
    /// Tokens one step runs at most (prompts longer than this run in chunks); also the
    /// most sessions one batched decode step holds in the arena.
    pub max_batch_tokens: usize,
    /// Rows of logits one step writes into the arena at most (decode rows of a batch,
    /// or positions of a scored chunk).
    pub max_logit_rows: usize,
}

impl ArenaCapacity {
    /// Tokens per step when the caller does not say.
    pub const DEFAULT_BATCH_TOKENS: usize = 512;
    /// Logit rows per step when the caller does not say.
    pub const DEFAULT_LOGIT_ROWS: usize = 16;

    /// The default capacity for sessions of `context_length` positions.
    pub fn for_context(context_length: usize) -> ArenaCapacity {
        let max_batch_tokens = Self::DEFAULT_BATCH_TOKENS.min(context_length).max(1);
        ArenaCapacity {
            max_batch_tokens,
            max_logit_rows: Self::DEFAULT_LOGIT_ROWS.min(max_batch_tokens),
        }
    }
}

/// The named intermediates of one step, in the order the forward writes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Slot {
    /// The step's token ids `[T]` (u32).
    TokenIds,
    /// The step's absolute positions `[T]` (u32).
    Positions,
    /// The unscaled token embedding `[T, D]` (architectures that scale it).
    Embedding,
    /// The residual stream `[T, D]`; each block's output is added to it in place.
    Hidden,
    /// The pre-attention and pre-FFN norm `[T, D]`.
    Norm,
    /// The query projection `[T, Hq·Dk]`.
    Q,
    /// Queries after the per-head q-norm.
    QNormed,
    /// Queries after rope.
    QRoped,
    /// The key projection `[T, Hkv·Dk]`.
    K,
    /// Keys after the per-head k-norm.
    KNormed,
    /// Keys after rope.
    KRoped,
    /// The value projection `[T, Hkv·Dv]`.
    V,
    /// The attention result `[T, Hq·Dv]`.
    Attention,
    /// The attention output projection `[T, D]`.
    AttentionOut,
    /// The attention output after its post-norm.
    AttentionPostNorm,
    /// The FFN gate projection `[T, F]`.
    FfnGate,
    /// The FFN up projection `[T, F]`.
    FfnUp,
    /// The gate's activation, then times the up projection in place `[T, F]`.
    FfnAct,
    /// The FFN down projection `[T, D]`.
    FfnDown,
    /// The router's logits `[T, E]` (mixtures of experts).
    RouterLogits,
    /// The router's gating (softmax or sigmoid) of its logits `[T, E]`; with a softmax
    /// over the chosen experts (gpt-oss), that softmax `[T, k]`.
    RouterProbs,
    /// The chosen experts `[T, k]` (u32).
    ExpertIds,
    /// The chosen experts' routing weights `[T, k]`, renormalised in place where the
    /// model does.
    ExpertWeights,
    /// The sum of each token's chosen routing weights `[T, 1]`.
    ExpertWeightSum,
    /// The routing weights times the model's expert weight scale `[T, k]`.
    ExpertWeightsScaled,
    /// The chosen experts' gate projections `[T, k, Fe]`.
    ExpertGate,
    /// The chosen experts' up projections `[T, k, Fe]`.
    ExpertUp,
    /// The experts' gate activation, then times their up projection in place
    /// `[T, k, Fe]`.
    ExpertAct,
    /// The clamped gate, then its activation, of a clamped SwiGLU `[T, k, Fe]` (gpt-oss).
    ExpertClamped,
    /// The chosen experts' down projections `[T, k, D]`, before their weighted sum
    /// into the FFN down slot.
    ExpertDown,
    /// The shared expert's output `[T, D]`, then times its gate in place.
    SharedDown,
    /// The shared expert's gate logit `[T, 1]`.
    SharedGateLogit,
    /// The shared expert's gate, the sigmoid of its logit `[T, 1]`.
    SharedGate,
    /// The FFN output after its post-norm.
    FfnPostNorm,
    /// A block branch times the residual scale, before its residual add `[T, D]`
    /// (Granite).
    ResidualScaled,
    /// The final norm of the rows whose logits are wanted `[R, D]`.
    OutputNorm,
    /// The logits `[R, V]`.
    Logits,
    /// The logits' scale and soft-cap scratch `[R, V]`.
    LogitsScratch,
}

/// The buffers of a [`StepArena`], one per [`Slot`] (`None` where the model never uses
/// the slot: no embedding scale, no logit soft-cap).
#[derive(Debug)]
struct ArenaBuffers {
    token_ids: Option<Tensor>,
    positions: Option<Tensor>,
    embedding: Option<Tensor>,
    hidden: Option<Tensor>,
    norm: Option<Tensor>,
    q: Option<Tensor>,
    q_normed: Option<Tensor>,
    q_roped: Option<Tensor>,
    k: Option<Tensor>,
    k_normed: Option<Tensor>,
    k_roped: Option<Tensor>,
    v: Option<Tensor>,
    attention: Option<Tensor>,
    attention_out: Option<Tensor>,
    attention_post_norm: Option<Tensor>,
    ffn_gate: Option<Tensor>,
    ffn_up: Option<Tensor>,
    ffn_act: Option<Tensor>,
    ffn_down: Option<Tensor>,
    router_logits: Option<Tensor>,
    router_probs: Option<Tensor>,
    expert_ids: Option<Tensor>,
    expert_weights: Option<Tensor>,
    expert_weight_sum: Option<Tensor>,
    expert_weights_scaled: Option<Tensor>,
    expert_gate: Option<Tensor>,
    expert_up: Option<Tensor>,
    expert_act: Option<Tensor>,
    expert_clamped: Option<Tensor>,
    expert_down: Option<Tensor>,
    shared_down: Option<Tensor>,
    shared_gate_logit: Option<Tensor>,
    shared_gate: Option<Tensor>,
    ffn_post_norm: Option<Tensor>,
    residual_scaled: Option<Tensor>,
    output_norm: Option<Tensor>,
    logits: Option<Tensor>,
    logits_scratch: Option<Tensor>,
}

/// Whether a slot's rows are the step's tokens or its logit rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    Tokens,
    Logits,
}

/// A slot's size: rows of `width` values of `dtype`, or absent.
#[derive(Clone, Copy, Debug)]
struct SlotSpec {
    rows: Rows,
    width: usize,
    dtype: DType,
}

impl ArenaBuffers {
    /// The buffer behind `slot`.
    fn get_mut(&mut self, slot: Slot) -> &mut Option<Tensor> {
        match slot {
            Slot::TokenIds => &mut self.token_ids,
            Slot::Positions => &mut self.positions,
            Slot::Embedding => &mut self.embedding,
            Slot::Hidden => &mut self.hidden,
            Slot::Norm => &mut self.norm,
            Slot::Q => &mut self.q,
            Slot::QNormed => &mut self.q_normed,
            Slot::QRoped => &mut self.q_roped,
            Slot::K => &mut self.k,
            Slot::KNormed => &mut self.k_normed,
            Slot::KRoped => &mut self.k_roped,
            Slot::V => &mut self.v,
            Slot::Attention => &mut self.attention,
            Slot::AttentionOut => &mut self.attention_out,
            Slot::AttentionPostNorm => &mut self.attention_post_norm,
            Slot::FfnGate => &mut self.ffn_gate,
            Slot::FfnUp => &mut self.ffn_up,
            Slot::FfnAct => &mut self.ffn_act,
            Slot::FfnDown => &mut self.ffn_down,
            Slot::RouterLogits => &mut self.router_logits,
            Slot::RouterProbs => &mut self.router_probs,
            Slot::ExpertIds => &mut self.expert_ids,
            Slot::ExpertWeights => &mut self.expert_weights,
            Slot::ExpertWeightSum => &mut self.expert_weight_sum,
            Slot::ExpertWeightsScaled => &mut self.expert_weights_scaled,
            Slot::ExpertGate => &mut self.expert_gate,
            Slot::ExpertUp => &mut self.expert_up,
            Slot::ExpertAct => &mut self.expert_act,
            Slot::ExpertClamped => &mut self.expert_clamped,
            Slot::ExpertDown => &mut self.expert_down,
            Slot::SharedDown => &mut self.shared_down,
            Slot::SharedGateLogit => &mut self.shared_gate_logit,
            Slot::SharedGate => &mut self.shared_gate,
            Slot::FfnPostNorm => &mut self.ffn_post_norm,
            Slot::ResidualScaled => &mut self.residual_scaled,
            Slot::OutputNorm => &mut self.output_norm,
            Slot::Logits => &mut self.logits,
            Slot::LogitsScratch => &mut self.logits_scratch,
        }
    }

    /// Every buffer with its slot (exhaustive: a new field must be listed here too).
    fn into_list(self) -> [(Slot, Option<Tensor>); SLOT_COUNT] {
        let ArenaBuffers {
            token_ids,
            positions,
            embedding,
            hidden,
            norm,
            q,
            q_normed,
            q_roped,
            k,
            k_normed,
            k_roped,
            v,
            attention,
            attention_out,
            attention_post_norm,
            ffn_gate,
            ffn_up,
            ffn_act,
            ffn_down,
            router_logits,
            router_probs,
            expert_ids,
            expert_weights,
            expert_weight_sum,
            expert_weights_scaled,
            expert_gate,
            expert_up,
            expert_act,
            expert_clamped,
            expert_down,
            shared_down,
            shared_gate_logit,
            shared_gate,
            ffn_post_norm,
            residual_scaled,
            output_norm,
            logits,
            logits_scratch,
        } = self;
        [
            (Slot::TokenIds, token_ids),
            (Slot::Positions, positions),
            (Slot::Embedding, embedding),
            (Slot::Hidden, hidden),
            (Slot::Norm, norm),
            (Slot::Q, q),
            (Slot::QNormed, q_normed),
            (Slot::QRoped, q_roped),
            (Slot::K, k),
            (Slot::KNormed, k_normed),
            (Slot::KRoped, k_roped),
            (Slot::V, v),
            (Slot::Attention, attention),
            (Slot::AttentionOut, attention_out),
            (Slot::AttentionPostNorm, attention_post_norm),
            (Slot::FfnGate, ffn_gate),
            (Slot::FfnUp, ffn_up),
            (Slot::FfnAct, ffn_act),
            (Slot::FfnDown, ffn_down),
            (Slot::RouterLogits, router_logits),
            (Slot::RouterProbs, router_probs),
            (Slot::ExpertIds, expert_ids),
            (Slot::ExpertWeights, expert_weights),
            (Slot::ExpertWeightSum, expert_weight_sum),
            (Slot::ExpertWeightsScaled, expert_weights_scaled),
            (Slot::ExpertGate, expert_gate),
            (Slot::ExpertUp, expert_up),
            (Slot::ExpertAct, expert_act),
            (Slot::ExpertClamped, expert_clamped),
            (Slot::ExpertDown, expert_down),
            (Slot::SharedDown, shared_down),
            (Slot::SharedGateLogit, shared_gate_logit),
            (Slot::SharedGate, shared_gate),
            (Slot::FfnPostNorm, ffn_post_norm),
            (Slot::ResidualScaled, residual_scaled),
            (Slot::OutputNorm, output_norm),
            (Slot::Logits, logits),
            (Slot::LogitsScratch, logits_scratch),
        ]
    }
}

/// How many slots there are.
const SLOT_COUNT: usize = 38;

/// Every slot, in declaration order (`SLOTS[slot as usize] == slot`).
const SLOTS: [Slot; SLOT_COUNT] = [
    Slot::TokenIds,
    Slot::Positions,
    Slot::Embedding,
    Slot::Hidden,
    Slot::Norm,
    Slot::Q,
    Slot::QNormed,
    Slot::QRoped,
    Slot::K,
    Slot::KNormed,
    Slot::KRoped,
    Slot::V,
    Slot::Attention,
    Slot::AttentionOut,
    Slot::AttentionPostNorm,
    Slot::FfnGate,
    Slot::FfnUp,
    Slot::FfnAct,
    Slot::FfnDown,
    Slot::RouterLogits,
    Slot::RouterProbs,
    Slot::ExpertIds,
    Slot::ExpertWeights,
    Slot::ExpertWeightSum,
    Slot::ExpertWeightsScaled,
    Slot::ExpertGate,
    Slot::ExpertUp,
    Slot::ExpertAct,
    Slot::ExpertClamped,
    Slot::ExpertDown,
    Slot::SharedDown,
    Slot::SharedGateLogit,
    Slot::SharedGate,
    Slot::FfnPostNorm,
    Slot::ResidualScaled,
    Slot::OutputNorm,
    Slot::Logits,
    Slot::LogitsScratch,
];

/// The size of `slot` for `config`, or `None` when the model never writes it.
fn slot_spec(config: &ModelConfig, slot: Slot) -> Option<SlotSpec> {
    let d = config.embedding_length;
    let q = config.head_count * config.key_length;
    let k = config.head_count_kv * config.key_length;
    let v = config.head_count_kv * config.value_length;
    let attention = config.head_count * config.value_length;
    let moe = config.moe.as_ref();
    // A mixture of experts' dense FFN slots hold its shared expert (if any).
    let f = match moe {
        Some(moe) => moe.shared_ffn_length,
        None => Some(config.feed_forward_length),
    };
    let shared = moe.is_some_and(|m| m.shared_ffn_length.is_some());
    let (experts, used, expert_f) = moe.map_or((0, 0, 0), |m| {
        (m.expert_count, m.experts_used, m.expert_ffn_length)
    });
    let tokens = |width| {
        Some(SlotSpec {
            rows: Rows::Tokens,
            width,
            dtype: DType::F32,
        })
    };
    let logits = |width| {
        Some(SlotSpec {
            rows: Rows::Logits,
            width,
            dtype: DType::F32,
        })
    };
    let ids = Some(SlotSpec {
        rows: Rows::Tokens,
        width: 1,
        dtype: DType::U32,
    });
    let when = |present: bool, spec: Option<SlotSpec>| spec.filter(|_| present);
    match slot {
        Slot::TokenIds | Slot::Positions => ids,
        Slot::Embedding => when(config.embedding_scale.is_some(), tokens(d)),
        Slot::ResidualScaled => when(config.residual_scale.is_some(), tokens(d)),
        Slot::Hidden | Slot::Norm | Slot::AttentionOut | Slot::FfnDown => tokens(d),
        Slot::Q | Slot::QRoped => tokens(q),
        Slot::QNormed => tokens(q),
        Slot::K | Slot::KRoped => tokens(k),
        Slot::KNormed => tokens(k),
        Slot::V => tokens(v),
        Slot::Attention => tokens(attention),
        Slot::AttentionPostNorm | Slot::FfnPostNorm => tokens(d),
        Slot::FfnGate | Slot::FfnUp | Slot::FfnAct => f.and_then(tokens),
        Slot::RouterLogits | Slot::RouterProbs => when(moe.is_some(), tokens(experts)),
        Slot::ExpertIds => when(
            moe.is_some(),
            Some(SlotSpec {
                rows: Rows::Tokens,
                width: used,
                dtype: DType::U32,
            }),
        ),
        Slot::ExpertWeights => when(moe.is_some(), tokens(used)),
        Slot::ExpertWeightSum => when(moe.is_some_and(|m| m.normalize_weights), tokens(1)),
        Slot::ExpertWeightsScaled => {
            when(moe.is_some_and(|m| m.weights_scale.is_some()), tokens(used))
        }
        Slot::ExpertGate | Slot::ExpertUp | Slot::ExpertAct => {
            when(moe.is_some(), tokens(used * expert_f))
        }
        Slot::ExpertClamped => when(
            moe.is_some() && config.arch.description().clamped_swiglu.is_some(),
            tokens(used * expert_f),
        ),
        Slot::ExpertDown => when(moe.is_some(), tokens(used * d)),
        Slot::SharedDown => when(shared, tokens(d)),
        Slot::SharedGateLogit | Slot::SharedGate => when(shared, tokens(1)),
        Slot::OutputNorm => logits(d),
        Slot::Logits => logits(config.vocab_size),
        Slot::LogitsScratch => when(
            config.final_logit_softcap.is_some() || config.logit_scale.is_some(),
            logits(config.vocab_size),
        ),
    }
}

/// What the arena did since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Steps that ran with their intermediates in the arena.
    pub steps: u64,
    /// Outputs that did not fit their slot (a step larger than the arena, or a slot the
    /// model was not sized for) and came from the backend's pool instead.
    pub pool_outputs: u64,
    /// Slot buffers replaced because a caller still held a view of the old one.
    pub replaced: u64,
}

/// What [`StepArena::release`] freed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaReport {
    /// The arena's label.
    pub label: String,
    /// Buffers released by this call (0 when the arena was already released).
    pub buffers: usize,
    /// Bytes of those buffers.
    pub bytes: usize,
    /// Buffers that outside views still held when released (freed when those drop).
    pub still_viewed: usize,
}

impl fmt::Display for ArenaReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "arena `{}`: released {} buffers, {} bytes",
            self.label, self.buffers, self.bytes
        )?;
        if self.still_viewed > 0 {
            write!(
                f,
                " ({} still held by views, freed when they drop)",
                self.still_viewed
            )?;
        }
        Ok(())
    }
}

/// Every intermediate of one step of a model, sized once from its config and an
/// [`ArenaCapacity`], in the memory of the executor's backend.
///
/// ```
/// use tempra_llm::engine::{ArenaCapacity, Slot, StepArena};
/// # use tempra_llm::testing::{ModelShape, RandomModelSpec, random_model};
/// # let shape = ModelShape::parse("dim=64,layers=2,heads=4,ffn=96,vocab=300")?;
/// # let file = random_model(&RandomModelSpec::llama(shape))?;
/// # let config = tempra_llm::model_config::ModelConfig::from_metadata(file.metadata())?;
/// let ctx = tempra_tensor::ExecContext::reference();
/// let capacity = ArenaCapacity { max_batch_tokens: 8, max_logit_rows: 2 };
/// let mut arena = StepArena::new(&ctx, "executor 0", &config, capacity)?;
/// let hidden = arena.target(Slot::Hidden, &[3, 64])?.expect("fits"); // a 3-token step
/// assert_eq!(hidden.dims(), [3, 64]);
/// println!("{}", arena.release()); // arena `executor 0`: released .. buffers, .. bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct StepArena {
    label: String,
    capacity: ArenaCapacity,
    ctx: ExecContext,
    buffers: Option<ArenaBuffers>,
    specs: [Option<SlotSpec>; SLOT_COUNT],
    stats: ArenaStats,
}

impl StepArena {
    /// Allocates (zeroed, outside the transient pool) every slot `config`'s model
    /// writes, for steps of up to `capacity` rows. `label` names the arena in reports.
    ///
    /// Errors: a capacity of zero rows, or the backend running out of memory.
    pub fn new(
        ctx: &ExecContext,
        label: impl Into<String>,
        config: &ModelConfig,
        capacity: ArenaCapacity,
    ) -> Result<StepArena> {
        if capacity.max_batch_tokens == 0 || capacity.max_logit_rows == 0 {
            return Err(LlmError::Argument {
                what: format!("a step arena needs at least one row ({capacity:?})"),
            });
        }
        let specs = SLOTS.map(|slot| slot_spec(config, slot));
        let mut buffers = ArenaBuffers {
            token_ids: None,
            positions: None,
            embedding: None,
            hidden: None,
            norm: None,
            q: None,
            q_normed: None,
            q_roped: None,
            k: None,
            k_normed: None,
            k_roped: None,
            v: None,
            attention: None,
            attention_out: None,
            attention_post_norm: None,
            ffn_gate: None,
            ffn_up: None,
            ffn_act: None,
            ffn_down: None,
            router_logits: None,
            router_probs: None,
            expert_ids: None,
            expert_weights: None,
            expert_weight_sum: None,
            expert_weights_scaled: None,
            expert_gate: None,
            expert_up: None,
            expert_act: None,
            expert_clamped: None,
            expert_down: None,
            shared_down: None,
            shared_gate_logit: None,
            shared_gate: None,
            ffn_post_norm: None,
            residual_scaled: None,
            output_norm: None,
            logits: None,
            logits_scratch: None,
        };
        for (slot, spec) in SLOTS.iter().zip(&specs) {
            if let Some(spec) = spec {
                let rows = rows_of(spec, &capacity);
                *buffers.get_mut(*slot) =
                    Some(ctx.zeros_persistent(&[rows, spec.width], spec.dtype)?);
            }
        }
        Ok(StepArena {
            label: label.into(),
            capacity,
            ctx: ctx.clone(),
            buffers: Some(buffers),
            specs,
            stats: ArenaStats::default(),
        })
    }

    /// The bytes an arena for `config` and `capacity` holds.
    pub fn bytes_for(config: &ModelConfig, capacity: &ArenaCapacity) -> usize {
        let specs = SLOTS.map(|slot| slot_spec(config, slot));
        specs_bytes(&specs, capacity)
    }

    /// The label given at creation.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The rows the arena holds.
    pub fn capacity(&self) -> &ArenaCapacity {
        &self.capacity
    }

    /// What the arena did so far.
    pub fn stats(&self) -> ArenaStats {
        self.stats
    }

    /// Bytes held (0 once released).
    pub fn bytes(&self) -> usize {
        match &self.buffers {
            Some(_) => specs_bytes(&self.specs, &self.capacity),
            None => 0,
        }
    }

    /// Buffers held (0 once released).
    pub fn buffer_count(&self) -> usize {
        match &self.buffers {
            Some(_) => self.specs.iter().flatten().count(),
            None => 0,
        }
    }

    /// Whether [`Self::release`] has run.
    pub fn is_released(&self) -> bool {
        self.buffers.is_none()
    }

    /// Counts a step that ran in the arena.
    pub(crate) fn count_step(&mut self) {
        self.stats.steps += 1;
    }

    /// Counts an output that came from the pool in an arena step.
    pub(crate) fn count_pool_output(&mut self) {
        self.stats.pool_outputs += 1;
    }

    /// `slot`'s buffer viewed as the contiguous `dims` (its first rows), ready to be an
    /// op's output: held by the arena alone (a buffer a caller still views is replaced
    /// first). `None` when `dims` does not fit the slot (or the model has no such slot):
    /// the caller takes the output from the pool. An error once released.
    pub fn target(&mut self, slot: Slot, dims: &[usize]) -> Result<Option<&mut Tensor>> {
        let index = slot as usize;
        let Some(spec) = self.specs[index] else {
            return Ok(None);
        };
        let needed: usize = dims.iter().product();
        if needed > rows_of(&spec, &self.capacity) * spec.width {
            return Ok(None);
        }
        let label = &self.label;
        let buffers = self.buffers.as_mut().ok_or_else(|| released(label))?;
        let buffer = buffers.get_mut(slot);
        if buffer.as_ref().is_some_and(|t| !t.is_unique()) {
            let rows = rows_of(&spec, &self.capacity);
            *buffer = Some(self.ctx.zeros_persistent(&[rows, spec.width], spec.dtype)?);
            self.stats.replaced += 1;
        }
        let Some(tensor) = buffer.as_mut() else {
            return Ok(None);
        };
        tensor.set_view(0, dims)?;
        Ok(Some(tensor))
    }

    /// [`Self::target`]'s buffer taken out of the arena, for the second output of an op
    /// with two (`top_k`'s indices): the caller writes it and gives it back with
    /// [`Self::restore`] (until then the slot is empty, and a target of it is `None`).
    pub(crate) fn take_target(&mut self, slot: Slot, dims: &[usize]) -> Result<Option<Tensor>> {
        if self.target(slot, dims)?.is_none() {
            return Ok(None);
        }
        Ok(self.buffers.as_mut().and_then(|b| b.get_mut(slot).take()))
    }

    /// Puts a buffer [`Self::take_target`] took back into `slot`.
    pub(crate) fn restore(&mut self, slot: Slot, buffer: Tensor) {
        if let Some(buffers) = self.buffers.as_mut() {
            *buffers.get_mut(slot) = Some(buffer);
        }
    }

    /// `slot`'s buffer as it was last viewed, when it is `view`'s storage (the forward's
    /// in-place updates: the residual add, the gated FFN product). The caller drops its
    /// own handle first, so the arena's is the only one.
    pub(crate) fn holding(&mut self, slot: Slot, view: &Tensor) -> Option<&mut Tensor> {
        let buffer = self.buffers.as_mut()?.get_mut(slot).as_mut()?;
        buffer.same_storage(view).then_some(buffer)
    }

    /// Zeroes the buffers that carry a step's inputs into its first op: the token ids,
    /// the positions and the residual stream. (Every other slot is written before it is
    /// read.)
    pub fn zero_prefill_essentials(&mut self) -> Result<()> {
        self.zero_where(
            |slot| matches!(slot, Slot::TokenIds | Slot::Positions | Slot::Hidden),
            usize::MAX,
        )
    }

    /// Zeroes the first `tokens` rows of every token-major slot (and the first
    /// `min(tokens, max_logit_rows)` rows of the logit-major ones): what a step of
    /// `tokens` tokens reads. Errors when `tokens` exceeds `max_batch_tokens`.
    pub fn zero_all_rows(&mut self, tokens: usize) -> Result<()> {
        if tokens > self.capacity.max_batch_tokens {
            return Err(LlmError::Argument {
                what: format!(
                    "arena `{}`: {tokens} rows, it holds {}",
                    self.label, self.capacity.max_batch_tokens
                ),
            });
        }
        self.zero_where(|_| true, tokens)
    }

    /// Zeroes every buffer.
    pub fn zero_all(&mut self) -> Result<()> {
        self.zero_where(|_| true, usize::MAX)
    }

    /// Zeroes the first `rows` rows of every slot `pick` accepts.
    fn zero_where(&mut self, pick: impl Fn(Slot) -> bool, rows: usize) -> Result<()> {
        if self.buffers.is_none() {
            return Err(released(&self.label));
        }
        for (index, slot) in SLOTS.into_iter().enumerate() {
            let Some(spec) = self.specs[index] else {
                continue;
            };
            if !pick(slot) {
                continue;
            }
            let n = rows.min(rows_of(&spec, &self.capacity));
            if n == 0 {
                continue;
            }
            let ctx = self.ctx.clone();
            if let Some(buffer) = self.target(slot, &[n, spec.width])? {
                ctx.fill(buffer, 0.0)?;
            }
        }
        Ok(())
    }

    /// Frees every buffer and reports what was freed. Idempotent: a second call frees
    /// nothing and reports 0 buffers. Runs on drop when not called.
    pub fn release(&mut self) -> ArenaReport {
        let mut report = ArenaReport {
            label: self.label.clone(),
            buffers: 0,
            bytes: 0,
            still_viewed: 0,
        };
        let Some(buffers) = self.buffers.take() else {
            return report;
        };
        for (_, tensor) in buffers.into_list() {
            let Some(tensor) = tensor else {
                continue;
            };
            report.buffers += 1;
            report.bytes += tensor.storage().byte_len();
            if tensor.storage_refs() > 1 {
                report.still_viewed += 1;
            }
            drop(tensor);
        }
        report
    }
}

impl Drop for StepArena {
    fn drop(&mut self) {
        let report = self.release();
        if report.still_viewed > 0 {
            eprintln!("tempra-llm: {report}");
        }
    }
}

/// The bytes of every present slot of `specs` at `capacity`.
fn specs_bytes(specs: &[Option<SlotSpec>], capacity: &ArenaCapacity) -> usize {
    specs
        .iter()
        .flatten()
        .map(|s| rows_of(s, capacity) * s.width * s.dtype.block_bytes())
        .sum()
}

/// The rows a slot holds at `capacity`.
fn rows_of(spec: &SlotSpec, capacity: &ArenaCapacity) -> usize {
    match spec.rows {
        Rows::Tokens => capacity.max_batch_tokens,
        Rows::Logits => capacity.max_logit_rows,
    }
}

/// The error for an arena used after [`StepArena::release`].
fn released(label: &str) -> LlmError {
    LlmError::Argument {
        what: format!("arena `{label}` was released"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_listed_in_declaration_order() {
        for (i, slot) in SLOTS.into_iter().enumerate() {
            assert_eq!(slot as usize, i, "{slot:?}");
        }
    }
}
