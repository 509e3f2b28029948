//! `ModelConfig`: a model's hyperparameters, read from GGUF metadata by architecture.

use std::fmt;

use tempra_tensor::{RopeConfig, RopeScaling, RopeStyle, UnaryOp};

use crate::error::{LlmError, Result};
use crate::gguf::{Metadata, keys};
use crate::tensor_names::BlockTensor;

/// The architectures tempra implements (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `llama`: Llama 2/3, Mistral, TinyLlama, llama2.c models.
    Llama,
    /// `qwen2`: Qwen2 / Qwen2.5 (biases on q/k/v).
    Qwen2,
    /// `qwen3`: Qwen3 (per-head q/k norms).
    Qwen3,
    /// `qwen2moe`: Qwen1.5-MoE and Qwen2-MoE (routed experts without renormalised
    /// weights, plus a shared expert with a sigmoid gate).
    Qwen2Moe,
    /// `qwen3moe`: Qwen3-MoE (Qwen3's attention, routed experts with renormalised
    /// weights).
    Qwen3Moe,
    /// `gpt-oss`: OpenAI's gpt-oss (attention sinks, alternating sliding-window layers,
    /// biases on attention and experts, a clamped SwiGLU, a softmax over the chosen
    /// experts' router logits).
    GptOss,
    /// `gemma2`: Gemma 2 (soft-capping, alternating sliding-window layers).
    Gemma2,
    /// `gemma3`: Gemma 3 (5 sliding-window layers per global layer, q/k norms).
    Gemma3,
    /// `phi3`: Phi-3 and Phi-4-mini (fused q/k/v and gate/up matrices, partial rotary,
    /// LongRoPE).
    Phi3,
    /// `granite`: IBM Granite 3 (embedding, attention, residual and logit multipliers).
    Granite,
    /// `olmo2`: OLMo 2 (norms after attention and FFN instead of before, q/k norms over
    /// the whole projection).
    Olmo2,
    /// `smollm3`: SmolLM3 (every fourth layer without rope).
    Smollm3,
    /// `bert`: BERT-family encoders (embeddings only: attention over every token,
    /// learned positions, layer norms after each residual add, a GELU FFN).
    Bert,
}

impl Arch {
    /// Every supported architecture.
    pub const ALL: [Arch; 13] = [
        Arch::Llama,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Qwen2Moe,
        Arch::Qwen3Moe,
        Arch::GptOss,
        Arch::Gemma2,
        Arch::Gemma3,
        Arch::Phi3,
        Arch::Granite,
        Arch::Olmo2,
        Arch::Smollm3,
        Arch::Bert,
    ];

    /// The GGUF name (`llama`).
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen2Moe => "qwen2moe",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::GptOss => "gpt-oss",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 => "phi3",
            Arch::Granite => "granite",
            Arch::Olmo2 => "olmo2",
            Arch::Smollm3 => "smollm3",
            Arch::Bert => "bert",
        }
    }

    /// The architecture named `name`, or [`LlmError::UnsupportedArch`].
    pub fn from_name(name: &str) -> Result<Arch> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| LlmError::UnsupportedArch {
                arch: name.to_string(),
            })
    }

    /// How rope pairs dims: interleaved for `llama`, `granite` and `smollm3` (llama.cpp's
    /// "normal" mode), NeoX halves for the others.
    pub const fn rope_style(self) -> RopeStyle {
        self.description().rope_style
    }

    /// What the forward and the config reader need to know of this architecture beyond
    /// the file's hyperparameters and the weights it has: biases, q/k norms, post-norms
    /// and a separate output matrix are used where the file has them (their absence is
    /// the architecture's choice: tied output, pre-norm only); soft-caps, sliding windows
    /// and rope scaling come from metadata, with the defaults below where it is silent.
    /// Fused matrices (`attn_qkv`, an `ffn_up` twice the FFN width holding gate and up)
    /// are split into views at load where the file has them. A new architecture is one
    /// more arm here (and its tests).
    pub const fn description(self) -> ArchDescription {
        const LLAMA: ArchDescription = ArchDescription {
            rope_style: RopeStyle::Interleaved,
            scaled_embedding: false,
            activation: UnaryOp::Silu,
            default_rms_eps: 1e-5,
            default_sliding_pattern: None,
            sliding_freq_base: None,
            width_scaled_attention_blocks: None,
            pre_norms: true,
            qk_norm: QkNormWidth::PerHead,
            no_rope_layer_interval: None,
            encoder: false,
            expert_weights_norm: true,
            expert_gating: ExpertGating::Softmax,
            clamped_swiglu: None,
            ffn_norm: BlockTensor::FfnNorm,
        };
        const GEMMA: ArchDescription = ArchDescription {
            rope_style: RopeStyle::Neox,
            scaled_embedding: true,
            activation: UnaryOp::GeluTanh,
            default_rms_eps: 1e-6,
            ..LLAMA
        };
        match self {
            Arch::Llama => LLAMA,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Qwen3Moe => ArchDescription {
                rope_style: RopeStyle::Neox,
                ..LLAMA
            },
            Arch::Qwen2Moe => ArchDescription {
                rope_style: RopeStyle::Neox,
                expert_weights_norm: false,
                ..LLAMA
            },
            Arch::GptOss => ArchDescription {
                rope_style: RopeStyle::Neox,
                default_sliding_pattern: Some(2),
                expert_weights_norm: false,
                expert_gating: ExpertGating::SoftmaxChosen,
                clamped_swiglu: Some(ClampedSwiglu {
                    alpha: 1.702,
                    limit: 7.0,
                }),
                ffn_norm: BlockTensor::PostAttentionNorm,
                ..LLAMA
            },
            Arch::Gemma2 => ArchDescription {
                default_sliding_pattern: Some(2),
                width_scaled_attention_blocks: Some(46),
                ..GEMMA
            },
            Arch::Gemma3 => ArchDescription {
                default_sliding_pattern: Some(6),
                sliding_freq_base: Some(10_000.0),
                width_scaled_attention_blocks: Some(62),
                ..GEMMA
            },
            Arch::Phi3 => ArchDescription {
                rope_style: RopeStyle::Neox,
                ..LLAMA
            },
            Arch::Granite => LLAMA,
            Arch::Olmo2 => ArchDescription {
                rope_style: RopeStyle::Neox,
                pre_norms: false,
                qk_norm: QkNormWidth::Full,
                ..LLAMA
            },
            Arch::Smollm3 => ArchDescription {
                no_rope_layer_interval: Some(4),
                ..LLAMA
            },
            Arch::Bert => ArchDescription {
                rope_style: RopeStyle::Neox,
                activation: UnaryOp::GeluErf,
                default_rms_eps: 1e-12,
                pre_norms: false,
                encoder: true,
                ..LLAMA
            },
        }
    }
}

/// One architecture's facts (see [`Arch::description`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArchDescription {
    /// How rope pairs dims (interleaved for `llama`, llama.cpp's "normal" mode; NeoX
    /// halves for the others).
    pub rope_style: RopeStyle,
    /// Whether the token embedding is scaled by √D.
    pub scaled_embedding: bool,
    /// The gated FFN's activation (SwiGLU's SiLU, GeGLU's tanh-GELU).
    pub activation: UnaryOp,
    /// The RMS-norm epsilon when the file names none.
    pub default_rms_eps: f32,
    /// Which layers slide when the file names no pattern: layer `i` does when
    /// `i % pattern < pattern - 1` (llama.cpp's `swa_pattern`).
    pub default_sliding_pattern: Option<usize>,
    /// The rope base θ of sliding-window layers, where it differs from the global one.
    pub sliding_freq_base: Option<f32>,
    /// The block count of the model size whose queries are scaled by the width per head
    /// (embedding ÷ heads) instead of the key length, when the file names no scale
    /// (llama.cpp's rule for Gemma 2 and 3 27B).
    pub width_scaled_attention_blocks: Option<usize>,
    /// Whether each block norms its input before attention and before the FFN
    /// (`attn_norm`, `ffn_norm`); OLMo 2 norms the branches' outputs instead (its
    /// post-norms) and has no pre-norms.
    pub pre_norms: bool,
    /// What the q/k norms (where the file has them) normalize over.
    pub qk_norm: QkNormWidth,
    /// Layer `i` runs without rope when `(i + 1) % interval == 0` (SmolLM3: 4, which
    /// llama.cpp fixes for the architecture rather than reading it from the file).
    pub no_rope_layer_interval: Option<usize>,
    /// An encoder (BERT): every token attends to every other, positions are learned
    /// embeddings (no rope), each residual add is followed by a layer norm (with bias),
    /// the FFN is `activation(up)·down` with biases, and there is no output head: the
    /// model makes embeddings only. Its `default_rms_eps` is the layer-norm epsilon.
    pub encoder: bool,
    /// Whether a mixture of experts divides each token's chosen routing weights by
    /// their sum (Mixtral, Qwen3-MoE; not Qwen2-MoE), which llama.cpp fixes for the
    /// architecture rather than reading it from the file.
    pub expert_weights_norm: bool,
    /// The router's gating when the file names none (`{arch}.expert_gating_func`).
    pub expert_gating: ExpertGating,
    /// The gated FFN's clamped SwiGLU in place of `activation(gate) · up` (gpt-oss;
    /// llama.cpp fixes its constants for the architecture).
    pub clamped_swiglu: Option<ClampedSwiglu>,
    /// The tensor that holds the pre-FFN norm: `ffn_norm`, or `post_attention_norm`
    /// where the converter names it after the checkpoint's `post_attention_layernorm`
    /// (gpt-oss). Such a model has no post-attention norm.
    pub ffn_norm: BlockTensor,
}

/// gpt-oss's clamped SwiGLU: `g · sigmoid(alpha · g) · (u + 1)` with the gate `g`
/// clamped to at most `limit` and the up projection `u` to `[-limit, limit]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClampedSwiglu {
    /// The sigmoid's slope.
    pub alpha: f32,
    /// The clamp.
    pub limit: f32,
}

/// How a router turns its logits into routing weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpertGating {
    /// Softmax over every expert, then the top k (Mixtral, Qwen-MoE).
    Softmax,
    /// Each expert's sigmoid, then the top k.
    Sigmoid,
    /// The top k of the raw logits, then a softmax over those k (gpt-oss; llama.cpp's
    /// gating function 3, "softmax weight").
    SoftmaxChosen,
}

/// A mixture of experts' hyperparameters: every block's FFN is `experts_used` of
/// `expert_count` gated FFNs chosen per token by a router, plus a shared expert where
/// the model has one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeConfig {
    /// Experts per block (`{arch}.expert_count`).
    pub expert_count: usize,
    /// Experts each token routes to (`{arch}.expert_used_count`).
    pub experts_used: usize,
    /// One expert's FFN width (`{arch}.expert_feed_forward_length`, else the
    /// feed-forward length, as Mixtral's files say it).
    pub expert_ffn_length: usize,
    /// The shared expert's FFN width (`{arch}.expert_shared_feed_forward_length`), for
    /// models that have one.
    pub shared_ffn_length: Option<usize>,
    /// The router's gating function (`{arch}.expert_gating_func`, softmax by default).
    pub gating: ExpertGating,
    /// Whether the chosen weights are divided by their sum (see
    /// [`ArchDescription::expert_weights_norm`]).
    pub normalize_weights: bool,
    /// Multiplies the routing weights (`{arch}.expert_weights_scale` where it is neither
    /// 0 nor 1).
    pub weights_scale: Option<f32>,
}

/// What a q/k norm normalizes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkNormWidth {
    /// Each head's `Dk` values (Qwen3, Gemma 3): weights `[Dk]`.
    PerHead,
    /// The whole projection, every head at once (OLMo 2): weights `[H·Dk]`.
    Full,
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rope frequency scaling named by `{arch}.rope.scaling.type`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScalingKind {
    /// No scaling (a file's `rope_freqs` or LongRoPE factor tensors still apply).
    None,
    /// Linear position interpolation by `factor`.
    Linear {
        /// The factor.
        factor: f32,
    },
    /// YaRN (see [`RopeScaling::Yarn`]).
    Yarn {
        /// The context extension factor.
        factor: f32,
        /// `yarn_beta_fast` (32 where the file names none).
        beta_fast: f32,
        /// `yarn_beta_slow` (1 where the file names none).
        beta_slow: f32,
        /// `yarn_ext_factor` (1 where the file names none).
        ext_factor: f32,
        /// `yarn_attn_factor`: the attention factor where the file names one; else
        /// `0.1·ln(factor) + 1` (transformers' and llama.cpp's default).
        attention_factor: Option<f32>,
    },
    /// LongRoPE (Phi-3): per-pair frequency factors from the file's
    /// `rope_factors_long` or `rope_factors_short` tensor, the long ones when a
    /// session's context exceeds the original context length (llama.cpp's choice), and
    /// the attention factor `rope.scaling.attn_factor`. Files without a scaling type
    /// that carry those tensors (what llama.cpp's converter writes for Phi-3) run the
    /// same way.
    LongRope,
}

/// Rope parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// The base θ (`{arch}.rope.freq_base`, 10000 by default).
    pub freq_base: f32,
    /// The base θ of sliding-window layers where it differs (`rope.freq_base_swa`;
    /// Gemma 3: 10000 where the file names none).
    pub freq_base_sliding: Option<f32>,
    /// Dims rotated per head (`{arch}.rope.dimension_count`, the key length by default).
    pub dimension_count: usize,
    /// Pair layout.
    pub style: RopeStyle,
    /// Frequency scaling (not applied on Gemma 3's sliding-window layers).
    pub scaling: RopeScalingKind,
    /// The context length the model was pre-trained with
    /// (`rope.scaling.original_context_length`, the context length by default): YaRN's
    /// and LongRoPE's reference.
    pub original_context_length: usize,
    /// `rope.scaling.attn_factor` (1 by default): multiplies the rotated dims (see
    /// [`RopeConfig::attention_factor`]; not on Gemma 3's sliding-window layers).
    pub attention_factor: f32,
}

/// A model's hyperparameters.
///
/// Read from `{arch}.*` keys with llama.cpp's defaults: `head_count_kv` defaults to
/// `head_count`, `key_length`/`value_length` to `embedding_length / head_count`,
/// `rope.dimension_count` to the key length, `rope.freq_base` to 10000 (1e6 for
/// Gemma 3's global layers is in its files), the RMS epsilon to 1e-5 (1e-6 for Gemma).
///
/// ```
/// use tempra_llm::gguf::Metadata;
/// use tempra_llm::model_config::{Arch, ModelConfig};
///
/// let mut md = Metadata::new();
/// md.set("general.architecture", "llama");
/// for (k, v) in [("context_length", 256u32), ("embedding_length", 64), ("block_count", 2),
///                ("feed_forward_length", 172), ("attention.head_count", 8)] {
///     md.set(format!("llama.{k}"), v);
/// }
/// md.set("llama.vocab_size", 512u32);
/// let c = ModelConfig::from_metadata(&md)?;
/// assert_eq!((c.arch, c.head_count_kv, c.key_length), (Arch::Llama, 8, 8));
/// # Ok::<(), tempra_llm::LlmError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The architecture.
    pub arch: Arch,
    /// Training context length.
    pub context_length: usize,
    /// Model width.
    pub embedding_length: usize,
    /// Transformer blocks.
    pub block_count: usize,
    /// Feed-forward width.
    pub feed_forward_length: usize,
    /// Query heads.
    pub head_count: usize,
    /// Key/value heads.
    pub head_count_kv: usize,
    /// Per-head key (and query) width.
    pub key_length: usize,
    /// Per-head value width.
    pub value_length: usize,
    /// The norms' epsilon: RMS norms', or an encoder's layer norms'.
    pub rms_norm_eps: f32,
    /// Rope parameters.
    pub rope: RopeParams,
    /// Sliding-window size of the sliding-window layers, if any.
    pub sliding_window: Option<usize>,
    /// Which layers slide: layer `i` does when `i % pattern < pattern - 1` (Gemma 2: 2,
    /// Gemma 3: 6; llama.cpp's `swa_pattern`).
    pub sliding_window_pattern: Option<usize>,
    /// Attention logit soft-cap (Gemma 2).
    pub attn_logit_softcap: Option<f32>,
    /// Final logit soft-cap (Gemma 2).
    pub final_logit_softcap: Option<f32>,
    /// The attention score scale (`1/sqrt(key_length)` unless the file or the
    /// architecture says otherwise).
    pub attention_scale: f32,
    /// Multiplies the token embedding: `{arch}.embedding_scale` (Granite), else √D for
    /// architectures that scale it (Gemma).
    pub embedding_scale: Option<f32>,
    /// Multiplies each block's attention and FFN branch before its residual add
    /// (`{arch}.residual_scale`, Granite).
    pub residual_scale: Option<f32>,
    /// Divides the logits (`{arch}.logit_scale`, Granite).
    pub logit_scale: Option<f32>,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// The mixture of experts, for models whose FFNs are routed experts.
    pub moe: Option<MoeConfig>,
}

/// Caps that keep a config usable for sizing buffers: anything above is a damaged file.
const MAX_WIDTH: usize = 1 << 20;
const MAX_BLOCKS: usize = 1 << 12;
const MAX_CONTEXT: usize = 1 << 26;
const MAX_VOCAB: usize = 1 << 24;

impl ModelConfig {
    /// Reads the hyperparameters of the architecture `general.architecture` names.
    ///
    /// Errors: [`LlmError::UnsupportedArch`], [`LlmError::MissingKey`] naming the first
    /// missing required key, [`LlmError::KeyType`], or [`LlmError::InvalidValue`] for
    /// zero, oversized or inconsistent values (heads not dividing the width, ...).
    pub fn from_metadata(md: &Metadata) -> Result<ModelConfig> {
        let arch = Arch::from_name(md.get_str(keys::GENERAL_ARCHITECTURE)?)?;
        let k = |suffix: &str| keys::arch_key(arch.name(), suffix);
        let count = |suffix: &str, max: usize| -> Result<usize> {
            let key = k(suffix);
            let v = md.get_usize(&key)?;
            check_range(&key, v, max)
        };
        let opt_count = |suffix: &str, max: usize| -> Result<Option<usize>> {
            let key = k(suffix);
            md.opt_usize(&key)?
                .map(|v| check_range(&key, v, max))
                .transpose()
        };
        let opt_f32 =
            |suffix: &str| -> Result<Option<f32>> { Ok(md.opt_f64(&k(suffix))?.map(|v| v as f32)) };

        let context_length = count(keys::CONTEXT_LENGTH, MAX_CONTEXT)?;
        let embedding_length = count(keys::EMBEDDING_LENGTH, MAX_WIDTH)?;
        let block_count = count(keys::BLOCK_COUNT, MAX_BLOCKS)?;
        let feed_forward_length = count(keys::FEED_FORWARD_LENGTH, MAX_WIDTH)?;
        let head_count = count(keys::HEAD_COUNT, MAX_WIDTH)?;
        let head_count_kv = opt_count(keys::HEAD_COUNT_KV, MAX_WIDTH)?.unwrap_or(head_count);
        if !head_count.is_multiple_of(head_count_kv) {
            return Err(invalid(
                k(keys::HEAD_COUNT_KV),
                format!("{head_count_kv} KV heads do not divide {head_count} query heads"),
            ));
        }
        let default_head = embedding_length / head_count;
        let key_length = opt_count(keys::KEY_LENGTH, MAX_WIDTH)?.unwrap_or(default_head);
        let value_length = opt_count(keys::VALUE_LENGTH, MAX_WIDTH)?.unwrap_or(default_head);
        if key_length == 0 || value_length == 0 {
            return Err(invalid(
                k(keys::HEAD_COUNT),
                format!("{head_count} heads leave no width per head of {embedding_length}"),
            ));
        }
        let description = arch.description();
        let eps_key = if description.encoder {
            keys::LAYER_NORM_EPS
        } else {
            keys::RMS_EPS
        };
        let rms_norm_eps = opt_f32(eps_key)?.unwrap_or(description.default_rms_eps);
        if !(rms_norm_eps.is_finite() && rms_norm_eps >= 0.0) {
            return Err(invalid(
                k(eps_key),
                format!("{rms_norm_eps} is not a valid epsilon"),
            ));
        }

        let rope = read_rope(md, arch, key_length, context_length)?;
        // Phi-4-mini's converter writes a window of 0 for none.
        let sliding_window = match md.opt_usize(&k(keys::SLIDING_WINDOW))? {
            Some(0) | None => None,
            Some(w) => Some(check_range(&k(keys::SLIDING_WINDOW), w, MAX_CONTEXT)?),
        };
        let sliding_window_pattern = opt_count(keys::SLIDING_WINDOW_PATTERN, MAX_BLOCKS)?
            .or(description.default_sliding_pattern);
        let attn_logit_softcap = opt_f32(keys::ATTN_LOGIT_SOFTCAP)?.filter(|&c| c > 0.0);
        let final_logit_softcap = opt_f32(keys::FINAL_LOGIT_SOFTCAP)?.filter(|&c| c > 0.0);
        let attention_scale = match opt_f32(keys::ATTENTION_SCALE)? {
            Some(s) if s > 0.0 => s,
            _ if description.width_scaled_attention_blocks == Some(block_count) => {
                1.0 / (default_head as f32).sqrt()
            }
            _ => 1.0 / (key_length as f32).sqrt(),
        };

        let multiplier = |suffix: &str| -> Result<Option<f32>> {
            match opt_f32(suffix)? {
                Some(v) if !(v.is_finite() && v > 0.0) => {
                    Err(invalid(k(suffix), format!("{v} is not a valid multiplier")))
                }
                v => Ok(v),
            }
        };
        let embedding_scale = multiplier(keys::EMBEDDING_SCALE)?.or(description
            .scaled_embedding
            .then(|| (embedding_length as f32).sqrt()));
        let residual_scale = multiplier(keys::RESIDUAL_SCALE)?;
        let logit_scale = multiplier(keys::LOGIT_SCALE)?;

        let vocab_size = match opt_count(keys::VOCAB_SIZE, MAX_VOCAB)? {
            Some(v) => v,
            None => {
                let tokens = md.get_array(keys::TOKENIZER_TOKENS).map_err(|e| match e {
                    LlmError::MissingKey { .. } => LlmError::MissingKey {
                        key: keys::TOKENIZER_TOKENS.into(),
                    },
                    other => other,
                })?;
                check_range(keys::TOKENIZER_TOKENS, tokens.len(), MAX_VOCAB)?
            }
        };
        let moe = read_moe(md, arch, feed_forward_length)?;

        Ok(ModelConfig {
            arch,
            context_length,
            embedding_length,
            block_count,
            feed_forward_length,
            head_count,
            head_count_kv,
            key_length,
            value_length,
            rms_norm_eps,
            rope,
            sliding_window,
            sliding_window_pattern,
            attn_logit_softcap,
            final_logit_softcap,
            attention_scale,
            embedding_scale,
            residual_scale,
            logit_scale,
            vocab_size,
            moe,
        })
    }

    /// Query heads per KV head.
    pub fn gqa(&self) -> usize {
        self.head_count / self.head_count_kv
    }

    /// Whether layer `layer` uses sliding-window attention.
    pub fn is_sliding_layer(&self, layer: usize) -> bool {
        match (self.sliding_window, self.sliding_window_pattern) {
            (Some(_), Some(p)) if p > 1 => layer % p < p - 1,
            _ => false,
        }
    }

    /// Whether layer `layer` applies rope (SmolLM3 leaves every fourth layer without).
    pub fn uses_rope(&self, layer: usize) -> bool {
        let description = self.arch.description();
        let interval = description.no_rope_layer_interval;
        !description.encoder && !interval.is_some_and(|n| (layer + 1).is_multiple_of(n))
    }

    /// The rope op parameters for layer `layer` (frequency factors, `rope_freqs` or
    /// LongRoPE's, come from the weights).
    pub fn rope_config(&self, layer: usize) -> RopeConfig {
        let sliding = self.is_sliding_layer(layer);
        let theta = match self.rope.freq_base_sliding {
            Some(base) if sliding => base,
            _ => self.rope.freq_base,
        };
        let mut rope = RopeConfig::new(self.rope.dimension_count, theta as f64, self.rope.style);
        if sliding && self.rope.freq_base_sliding.is_some() {
            return rope;
        }
        let mut attention_factor = self.rope.attention_factor as f64;
        rope.scaling = match self.rope.scaling {
            RopeScalingKind::None | RopeScalingKind::LongRope => RopeScaling::None,
            RopeScalingKind::Linear { factor } => RopeScaling::Linear {
                factor: factor as f64,
            },
            RopeScalingKind::Yarn {
                factor,
                beta_fast,
                beta_slow,
                ext_factor,
                attention_factor: yarn_factor,
            } => {
                let factor = factor as f64;
                attention_factor *= match yarn_factor {
                    Some(f) => f as f64,
                    None if factor > 1.0 => 0.1 * factor.ln() + 1.0,
                    None => 1.0,
                };
                RopeScaling::Yarn {
                    factor,
                    original_max_position: self.rope.original_context_length as f64,
                    beta_fast: beta_fast as f64,
                    beta_slow: beta_slow as f64,
                    ext_factor: ext_factor as f64,
                }
            }
        };
        rope.attention_factor = attention_factor;
        rope
    }
}

fn invalid(key: impl Into<String>, what: impl Into<String>) -> LlmError {
    LlmError::InvalidValue {
        key: key.into(),
        what: what.into(),
    }
}

fn check_range(key: &str, v: usize, max: usize) -> Result<usize> {
    if v == 0 || v > max {
        return Err(invalid(key, format!("{v} is outside 1..={max}")));
    }
    Ok(v)
}

fn read_rope(
    md: &Metadata,
    arch: Arch,
    key_length: usize,
    context_length: usize,
) -> Result<RopeParams> {
    let k = |suffix: &str| keys::arch_key(arch.name(), suffix);
    let freq_base = md.opt_f64(&k(keys::ROPE_FREQ_BASE))?.unwrap_or(10_000.0) as f32;
    if !(freq_base.is_finite() && freq_base > 1.0) {
        return Err(invalid(
            k(keys::ROPE_FREQ_BASE),
            format!("{freq_base} is not a valid rope base"),
        ));
    }
    let dimension_count = md
        .opt_usize(&k(keys::ROPE_DIMENSION_COUNT))?
        .unwrap_or(key_length);
    if dimension_count == 0 || dimension_count > key_length || !dimension_count.is_multiple_of(2) {
        return Err(invalid(
            k(keys::ROPE_DIMENSION_COUNT),
            format!(
                "{dimension_count} is not an even count of at most the key length {key_length}"
            ),
        ));
    }
    let factor = match md.opt_f64(&k(keys::ROPE_SCALING_FACTOR))? {
        Some(f) => Some(f),
        None => md.opt_f64(&k(keys::ROPE_SCALE_LINEAR))?,
    }
    .map(|f| f as f32);
    let kind = md.opt_str(&k(keys::ROPE_SCALING_TYPE))?;
    let positive = |suffix: &str, default: f32| -> Result<f32> {
        match md.opt_f64(&k(suffix))? {
            None => Ok(default),
            Some(v) if v.is_finite() && v > 0.0 => Ok(v as f32),
            Some(v) => Err(invalid(k(suffix), format!("{v} must be finite and > 0"))),
        }
    };
    let scaling = match (kind, factor) {
        (Some("none"), _) | (None, None) => RopeScalingKind::None,
        (Some("longrope"), _) => RopeScalingKind::LongRope,
        (_, Some(f)) if f == 0.0 || f == 1.0 => RopeScalingKind::None,
        (_, Some(f)) if !(f.is_finite() && f > 0.0) => {
            return Err(invalid(
                k(keys::ROPE_SCALING_FACTOR),
                format!("{f} is not a valid factor"),
            ));
        }
        (Some("linear") | None, Some(factor)) => RopeScalingKind::Linear { factor },
        (Some("yarn"), Some(factor)) => {
            if md
                .opt_f64(&k(keys::ROPE_SCALING_YARN_LOG_MUL))?
                .is_some_and(|m| m != 0.0)
            {
                return Err(invalid(
                    k(keys::ROPE_SCALING_YARN_LOG_MUL),
                    "YaRN with a log multiplier (DeepSeek's mscale_all_dim) is not supported",
                ));
            }
            let ext_factor = match md.opt_f64(&k(keys::ROPE_SCALING_YARN_EXT_FACTOR))? {
                None => 1.0,
                Some(v) if (0.0..=1.0).contains(&v) => v as f32,
                Some(v) => {
                    return Err(invalid(
                        k(keys::ROPE_SCALING_YARN_EXT_FACTOR),
                        format!("{v} is outside 0..=1"),
                    ));
                }
            };
            let attention_factor = match md.opt_f64(&k(keys::ROPE_SCALING_YARN_ATTN_FACTOR))? {
                None => None,
                Some(_) => Some(positive(keys::ROPE_SCALING_YARN_ATTN_FACTOR, 1.0)?),
            };
            RopeScalingKind::Yarn {
                factor,
                beta_fast: positive(keys::ROPE_SCALING_YARN_BETA_FAST, 32.0)?,
                beta_slow: positive(keys::ROPE_SCALING_YARN_BETA_SLOW, 1.0)?,
                ext_factor,
                attention_factor,
            }
        }
        (Some(kind @ ("linear" | "yarn")), None) => {
            return Err(invalid(
                k(keys::ROPE_SCALING_FACTOR),
                format!("missing for `{kind}` rope scaling"),
            ));
        }
        (Some(other), _) => {
            return Err(invalid(
                k(keys::ROPE_SCALING_TYPE),
                format!("unsupported rope scaling `{other}`"),
            ));
        }
    };
    let original_context_length = match md.opt_usize(&k(keys::ROPE_SCALING_ORIG_CTX))? {
        Some(n) => check_range(&k(keys::ROPE_SCALING_ORIG_CTX), n, MAX_CONTEXT)?,
        None => context_length,
    };
    let freq_base_sliding = match md.opt_f64(&k(keys::ROPE_FREQ_BASE_SWA))? {
        Some(b) if b.is_finite() && b > 1.0 => Some(b as f32),
        Some(b) => {
            return Err(invalid(
                k(keys::ROPE_FREQ_BASE_SWA),
                format!("{b} is not a valid rope base"),
            ));
        }
        None => arch.description().sliding_freq_base,
    };
    Ok(RopeParams {
        freq_base,
        freq_base_sliding,
        dimension_count,
        style: arch.rope_style(),
        scaling,
        original_context_length,
        attention_factor: positive(keys::ROPE_SCALING_ATTN_FACTOR, 1.0)?,
    })
}

/// The most experts a block may have: more is a damaged file.
const MAX_EXPERTS: usize = 1 << 12;

/// A mixture of experts' hyperparameters, or `None` for a dense model (no
/// `{arch}.expert_count`, or 0).
fn read_moe(md: &Metadata, arch: Arch, feed_forward_length: usize) -> Result<Option<MoeConfig>> {
    let k = |suffix: &str| keys::arch_key(arch.name(), suffix);
    let expert_count = match md.opt_usize(&k(keys::EXPERT_COUNT))? {
        None | Some(0) => return Ok(None),
        Some(n) => check_range(&k(keys::EXPERT_COUNT), n, MAX_EXPERTS)?,
    };
    if arch.description().encoder {
        return Err(invalid(
            k(keys::EXPERT_COUNT),
            format!("{arch} has no mixture-of-experts form"),
        ));
    }
    let used_key = k(keys::EXPERT_USED_COUNT);
    let experts_used = check_range(&used_key, md.get_usize(&used_key)?, MAX_EXPERTS)?;
    if experts_used > expert_count {
        return Err(invalid(
            used_key,
            format!("{experts_used} experts used of {expert_count}"),
        ));
    }
    let width = |suffix: &str| -> Result<Option<usize>> {
        let key = k(suffix);
        md.opt_usize(&key)?
            .map(|v| check_range(&key, v, MAX_WIDTH))
            .transpose()
    };
    let expert_ffn_length = width(keys::EXPERT_FEED_FORWARD_LENGTH)?.unwrap_or(feed_forward_length);
    let shared_ffn_length = width(keys::EXPERT_SHARED_FEED_FORWARD_LENGTH)?.filter(|&w| w > 0);
    let gating = match md.opt_usize(&k(keys::EXPERT_GATING_FUNC))? {
        None | Some(0) => arch.description().expert_gating,
        Some(1) => ExpertGating::Softmax,
        Some(2) => ExpertGating::Sigmoid,
        Some(3) => ExpertGating::SoftmaxChosen,
        Some(other) => {
            return Err(invalid(
                k(keys::EXPERT_GATING_FUNC),
                format!(
                    "gating function {other} (tempra knows 1 softmax, 2 sigmoid and 3 softmax \
                     over the chosen)"
                ),
            ));
        }
    };
    let weights_scale = match md.opt_f64(&k(keys::EXPERT_WEIGHTS_SCALE))? {
        None => None,
        Some(s) if s == 0.0 || s == 1.0 => None,
        Some(s) if s.is_finite() && s > 0.0 => Some(s as f32),
        Some(s) => {
            return Err(invalid(
                k(keys::EXPERT_WEIGHTS_SCALE),
                format!("{s} is not a valid scale"),
            ));
        }
    };
    Ok(Some(MoeConfig {
        expert_count,
        experts_used,
        expert_ffn_length,
        shared_ffn_length,
        gating,
        normalize_weights: arch.description().expert_weights_norm,
        weights_scale,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(arch: &str) -> Metadata {
        let mut md = Metadata::new();
        md.set("general.architecture", arch);
        for (key, v) in [
            ("context_length", 8192u32),
            ("embedding_length", 2304),
            ("block_count", 26),
            ("feed_forward_length", 9216),
            ("attention.head_count", 8),
            ("attention.head_count_kv", 4),
            ("attention.key_length", 256),
            ("attention.value_length", 256),
            ("vocab_size", 256000),
        ] {
            md.set(format!("{arch}.{key}"), v);
        }
        md
    }

    #[test]
    fn gemma2_keys() {
        let mut md = base("gemma2");
        md.set("gemma2.attention.sliding_window", 4096u32);
        md.set("gemma2.attn_logit_softcapping", 50.0f32);
        md.set("gemma2.final_logit_softcapping", 30.0f32);
        let c = ModelConfig::from_metadata(&md).unwrap();
        assert_eq!((c.key_length, c.gqa(), c.rms_norm_eps), (256, 2, 1e-6));
        assert_eq!(
            (c.attn_logit_softcap, c.final_logit_softcap),
            (Some(50.0), Some(30.0))
        );
        assert!(c.is_sliding_layer(0) && !c.is_sliding_layer(1));
        assert_eq!(c.attention_scale, 1.0 / 16.0);
        assert_eq!(c.rope.style, RopeStyle::Neox);
    }

    #[test]
    fn gemma3_local_layers_use_their_own_base_unscaled() {
        let mut md = base("gemma3");
        md.set("gemma3.attention.sliding_window", 1024u32);
        md.set("gemma3.rope.freq_base", 1_000_000f32);
        md.set("gemma3.rope.scaling.type", "linear");
        md.set("gemma3.rope.scaling.factor", 8.0f32);
        let c = ModelConfig::from_metadata(&md).unwrap();
        assert!((0..5).all(|l| c.is_sliding_layer(l)) && !c.is_sliding_layer(5));
        let local = c.rope_config(0);
        let global = c.rope_config(5);
        assert_eq!((local.theta, local.scaling), (10_000.0, RopeScaling::None));
        md.set("gemma3.rope.freq_base_swa", 20_000f32);
        let swa = ModelConfig::from_metadata(&md)
            .unwrap()
            .rope_config(0)
            .theta;
        assert_eq!(swa, 20_000.0);
        assert_eq!(
            (global.theta, global.scaling),
            (1_000_000.0, RopeScaling::Linear { factor: 8.0 })
        );
    }

    #[test]
    fn errors_name_the_key() {
        let mut md = base("qwen3");
        md.remove("qwen3.block_count");
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(
            matches!(&e, LlmError::MissingKey { key } if key == "qwen3.block_count"),
            "{e}"
        );

        let mut md = base("llama");
        md.set("llama.attention.head_count_kv", 3u32);
        assert!(
            ModelConfig::from_metadata(&md)
                .unwrap_err()
                .to_string()
                .contains("llama.attention.head_count_kv")
        );

        let mut md = base("llama");
        md.set("llama.embedding_length", "wide");
        assert!(matches!(
            ModelConfig::from_metadata(&md),
            Err(LlmError::KeyType { .. })
        ));

        let e = ModelConfig::from_metadata(&base("falcon")).unwrap_err();
        assert!(
            matches!(&e, LlmError::UnsupportedArch { arch } if arch == "falcon"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "unsupported architecture `falcon` (supported: llama, qwen2, qwen3, qwen2moe, \
             qwen3moe, gpt-oss, gemma2, gemma3, phi3, granite, olmo2, smollm3, bert)"
        );

        let mut md = base("qwen3");
        md.set("qwen3.rope.scaling.type", "dynamic");
        md.set("qwen3.rope.scaling.factor", 2.0f32);
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(
            e.to_string().contains("qwen3.rope.scaling.type") && e.to_string().contains("dynamic"),
            "{e}"
        );

        let mut md = base("llama");
        md.remove("llama.vocab_size");
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(e.to_string().contains("tokenizer.ggml.tokens"), "{e}");
    }

    #[test]
    fn yarn_reads_its_keys_and_defaults() {
        let mut md = base("qwen3");
        md.set("qwen3.rope.scaling.type", "yarn");
        md.set("qwen3.rope.scaling.factor", 4.0f32);
        md.set("qwen3.rope.scaling.original_context_length", 2048u32);
        let c = ModelConfig::from_metadata(&md).unwrap();
        let rope = c.rope_config(0);
        assert_eq!(
            rope.scaling,
            RopeScaling::Yarn {
                factor: 4.0,
                original_max_position: 2048.0,
                beta_fast: 32.0,
                beta_slow: 1.0,
                ext_factor: 1.0,
            }
        );
        assert!((rope.attention_factor - (1.0 + 0.1 * 4f64.ln())).abs() < 1e-7);

        md.set("qwen3.rope.scaling.yarn_beta_fast", 16.0f32);
        md.set("qwen3.rope.scaling.yarn_attn_factor", 1.5f32);
        md.set("qwen3.rope.scaling.attn_factor", 2.0f32);
        let rope = ModelConfig::from_metadata(&md).unwrap().rope_config(0);
        assert!(matches!(
            rope.scaling,
            RopeScaling::Yarn {
                beta_fast: 16.0,
                ..
            }
        ));
        assert_eq!(rope.attention_factor, 3.0);

        md.set("qwen3.rope.scaling.yarn_log_multiplier", 0.1f32);
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(e.to_string().contains("yarn_log_multiplier"), "{e}");
    }

    #[test]
    fn phi3_granite_olmo2_smollm3_descriptions() {
        let mut md = base("phi3");
        md.set("phi3.rope.dimension_count", 192u32);
        md.set("phi3.rope.scaling.attn_factor", 1.19f32);
        md.set("phi3.rope.scaling.original_context_length", 4096u32);
        md.set("phi3.attention.sliding_window", 0u32);
        let c = ModelConfig::from_metadata(&md).unwrap();
        let rope = c.rope_config(3);
        assert_eq!((rope.rotary_dims, rope.style), (192, RopeStyle::Neox));
        assert_eq!(
            (rope.scaling, rope.attention_factor),
            (RopeScaling::None, 1.19f32 as f64)
        );
        assert_eq!(
            (c.sliding_window, c.rope.original_context_length),
            (None, 4096)
        );

        let mut md = base("granite");
        md.set("granite.embedding_scale", 12.0f32);
        md.set("granite.residual_scale", 0.22f32);
        md.set("granite.logit_scale", 8.0f32);
        md.set("granite.attention.scale", 0.0078125f32);
        let c = ModelConfig::from_metadata(&md).unwrap();
        assert_eq!(
            (
                c.embedding_scale,
                c.residual_scale,
                c.logit_scale,
                c.attention_scale
            ),
            (Some(12.0), Some(0.22), Some(8.0), 0.0078125)
        );
        assert_eq!(c.rope.style, RopeStyle::Interleaved);
        md.set("granite.residual_scale", -1.0f32);
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(e.to_string().contains("granite.residual_scale"), "{e}");

        let c = ModelConfig::from_metadata(&base("olmo2")).unwrap();
        let d = c.arch.description();
        assert_eq!((d.pre_norms, d.qk_norm), (false, QkNormWidth::Full));
        assert_eq!(c.embedding_scale, None);

        let c = ModelConfig::from_metadata(&base("smollm3")).unwrap();
        let roped: Vec<bool> = (0..8).map(|l| c.uses_rope(l)).collect();
        assert_eq!(roped, [true, true, true, false, true, true, true, false]);
        let c = ModelConfig::from_metadata(&base("gemma2")).unwrap();
        assert_eq!(c.embedding_scale, Some((2304f32).sqrt()));
        assert!((0..8).all(|l| c.uses_rope(l)));
    }
}
