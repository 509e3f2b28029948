//! `ModelConfig`: a model's hyperparameters, read from GGUF metadata by architecture.

use std::fmt;

use tempra_tensor::{RopeConfig, RopeScaling, RopeStyle, UnaryOp};

use crate::error::{LlmError, Result};
use crate::gguf::{Metadata, keys};

/// The architectures tempra implements (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `llama`: Llama 2/3, Mistral, TinyLlama, llama2.c models.
    Llama,
    /// `qwen2`: Qwen2 / Qwen2.5 (biases on q/k/v).
    Qwen2,
    /// `qwen3`: Qwen3 (per-head q/k norms).
    Qwen3,
    /// `gemma2`: Gemma 2 (soft-capping, alternating sliding-window layers).
    Gemma2,
    /// `gemma3`: Gemma 3 (5 sliding-window layers per global layer, q/k norms).
    Gemma3,
}

impl Arch {
    /// Every supported architecture.
    pub const ALL: [Arch; 5] = [
        Arch::Llama,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Gemma2,
        Arch::Gemma3,
    ];

    /// The GGUF name (`llama`).
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma3 => "gemma3",
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

    /// How rope pairs dims: interleaved for `llama` (llama.cpp's "normal" mode), NeoX
    /// halves for the others.
    pub const fn rope_style(self) -> RopeStyle {
        self.description().rope_style
    }

    /// What the forward and the config reader need to know of this architecture beyond
    /// the file's hyperparameters and the weights it has: biases, q/k norms, post-norms
    /// and a separate output matrix are used where the file has them (their absence is
    /// the architecture's choice: tied output, pre-norm only); soft-caps, sliding windows
    /// and rope scaling come from metadata, with the defaults below where it is silent.
    /// A new architecture is one more arm here (and its tests).
    pub const fn description(self) -> ArchDescription {
        const LLAMA: ArchDescription = ArchDescription {
            rope_style: RopeStyle::Interleaved,
            scaled_embedding: false,
            activation: UnaryOp::Silu,
            default_rms_eps: 1e-5,
            default_sliding_pattern: None,
            sliding_freq_base: None,
            width_scaled_attention_blocks: None,
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
            Arch::Qwen2 | Arch::Qwen3 => ArchDescription {
                rope_style: RopeStyle::Neox,
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
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rope frequency scaling named by `{arch}.rope.scaling.type`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScalingKind {
    /// No scaling.
    None,
    /// Linear position interpolation by `factor`.
    Linear {
        /// The factor.
        factor: f32,
    },
    /// YaRN (read, but not yet implemented by the engines).
    Yarn {
        /// The factor.
        factor: f32,
        /// The pre-training context length.
        original_context_length: usize,
    },
}

/// Rope parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// The base θ (`{arch}.rope.freq_base`, 10000 by default).
    pub freq_base: f32,
    /// The base θ of sliding-window layers where it differs (Gemma 3: 10000).
    pub freq_base_sliding: Option<f32>,
    /// Dims rotated per head (`{arch}.rope.dimension_count`, the key length by default).
    pub dimension_count: usize,
    /// Pair layout.
    pub style: RopeStyle,
    /// Frequency scaling (not applied on Gemma 3's sliding-window layers).
    pub scaling: RopeScalingKind,
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
    /// RMSNorm epsilon.
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
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Experts per MoE layer (0 for dense models).
    pub expert_count: usize,
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
        let rms_norm_eps = opt_f32(keys::RMS_EPS)?.unwrap_or(description.default_rms_eps);
        if !(rms_norm_eps.is_finite() && rms_norm_eps >= 0.0) {
            return Err(invalid(
                k(keys::RMS_EPS),
                format!("{rms_norm_eps} is not a valid epsilon"),
            ));
        }

        let rope = read_rope(md, arch, key_length)?;
        let sliding_window = opt_count(keys::SLIDING_WINDOW, MAX_CONTEXT)?;
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
        let expert_count = md.opt_usize(&k(keys::EXPERT_COUNT))?.unwrap_or(0);

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
            vocab_size,
            expert_count,
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

    /// The rope op parameters for layer `layer`.
    ///
    /// Errors: YaRN scaling, which the engines do not implement yet, is an
    /// [`LlmError::InvalidValue`].
    pub fn rope_config(&self, layer: usize) -> Result<RopeConfig> {
        let sliding = self.is_sliding_layer(layer);
        let theta = match self.rope.freq_base_sliding {
            Some(base) if sliding => base,
            _ => self.rope.freq_base,
        };
        let mut rope = RopeConfig::new(self.rope.dimension_count, theta as f64, self.rope.style);
        let scaled = !(sliding && self.rope.freq_base_sliding.is_some());
        rope.scaling = match self.rope.scaling {
            RopeScalingKind::Linear { factor } if scaled => RopeScaling::Linear {
                factor: factor as f64,
            },
            RopeScalingKind::Yarn { .. } if scaled => {
                return Err(invalid(
                    keys::arch_key(self.arch.name(), keys::ROPE_SCALING_TYPE),
                    "YaRN rope scaling is not supported yet",
                ));
            }
            _ => RopeScaling::None,
        };
        Ok(rope)
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

fn read_rope(md: &Metadata, arch: Arch, key_length: usize) -> Result<RopeParams> {
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
    let scaling = match (kind, factor) {
        (Some("none"), _) | (None, None) => RopeScalingKind::None,
        (_, Some(f)) if f == 0.0 || f == 1.0 => RopeScalingKind::None,
        (_, Some(f)) if !(f.is_finite() && f > 0.0) => {
            return Err(invalid(
                k(keys::ROPE_SCALING_FACTOR),
                format!("{f} is not a valid factor"),
            ));
        }
        (Some("linear") | None, Some(factor)) => RopeScalingKind::Linear { factor },
        (Some("yarn"), Some(factor)) => RopeScalingKind::Yarn {
            factor,
            original_context_length: md.opt_usize(&k(keys::ROPE_SCALING_ORIG_CTX))?.unwrap_or(0),
        },
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
    Ok(RopeParams {
        freq_base,
        freq_base_sliding: arch.description().sliding_freq_base,
        dimension_count,
        style: arch.rope_style(),
        scaling,
    })
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
        let local = c.rope_config(0).unwrap();
        let global = c.rope_config(5).unwrap();
        assert_eq!((local.theta, local.scaling), (10_000.0, RopeScaling::None));
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

        let e = ModelConfig::from_metadata(&base("phi3")).unwrap_err();
        assert!(
            matches!(&e, LlmError::UnsupportedArch { arch } if arch == "phi3"),
            "{e}"
        );

        let mut md = base("llama");
        md.remove("llama.vocab_size");
        let e = ModelConfig::from_metadata(&md).unwrap_err();
        assert!(e.to_string().contains("tokenizer.ggml.tokens"), "{e}");
    }
}
