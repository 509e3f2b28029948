//! `ModelShape`: the sizes of a random test model, from a preset or a `key=value` list.

use std::fmt;

use crate::error::{LlmError, Result};

use super::synthetic_vocab::SPECIAL_AND_BYTE_TOKENS;

/// The sizes of a llama-architecture model, dense or a mixture of experts (Mixtral's
/// form: every block's FFN is `experts_used` of `experts` FFNs of width `expert_ffn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelShape {
    /// Model width.
    pub dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// Vocabulary size (at least 260).
    pub vocab: usize,
    /// Context length.
    pub context: usize,
    /// Whether the classifier is tied to the token embedding (no `output.weight`).
    pub tied: bool,
    /// Experts per block (0: a dense model).
    pub experts: usize,
    /// Experts each token routes to.
    pub experts_used: usize,
    /// One expert's FFN width.
    pub expert_ffn: usize,
}

impl ModelShape {
    /// For tests: every matrix row a multiple of 256 (so every K-quant applies), two
    /// layers, GQA 2, ~1.4M parameters.
    pub const TINY: ModelShape = ModelShape {
        dim: 256,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        ffn: 512,
        vocab: 384,
        context: 256,
        tied: false,
        experts: 0,
        experts_used: 0,
        expert_ffn: 0,
    };
    /// [`Self::TINY`] as a mixture of 8 experts of width 128, 2 used per token.
    pub const TINY_MOE: ModelShape = ModelShape {
        experts: 8,
        experts_used: 2,
        expert_ffn: 128,
        ..Self::TINY
    };
    /// A Llama-2-style 110M model (llama2.c's `stories110M` sizes, 32000 vocabulary).
    pub const SIZE_110M: ModelShape = ModelShape {
        dim: 768,
        layers: 12,
        heads: 12,
        kv_heads: 12,
        ffn: 2048,
        vocab: 32000,
        context: 1024,
        tied: false,
        experts: 0,
        experts_used: 0,
        expert_ffn: 0,
    };
    /// TinyLlama-1.1B's sizes.
    pub const SIZE_1B: ModelShape = ModelShape {
        dim: 2048,
        layers: 22,
        heads: 32,
        kv_heads: 4,
        ffn: 5632,
        vocab: 32000,
        context: 2048,
        tied: false,
        experts: 0,
        experts_used: 0,
        expert_ffn: 0,
    };
    /// Qwen3-30B-A3B's form scaled to about 2.5 B parameters (0.3 B active per token):
    /// width 1024, 24 layers, 16 query and 4 KV heads, 64 experts of width 512, 8 used.
    pub const SIZE_MOE_2B: ModelShape = ModelShape {
        dim: 1024,
        layers: 24,
        heads: 16,
        kv_heads: 4,
        ffn: 512,
        vocab: 32000,
        context: 2048,
        tied: false,
        experts: 64,
        experts_used: 8,
        expert_ffn: 512,
    };

    /// A preset name (`tiny`, `tiny-moe`, `110m`, `1b`, `moe-2b`) or comma-separated
    /// `key=value` overrides of `tiny` with keys `dim`, `layers`, `heads`, `kv_heads`,
    /// `ffn`, `vocab`, `context`, `tied` (`true`/`false`), `experts`, `experts_used`,
    /// `expert_ffn`; `kv_heads` defaults to `heads` when `heads` is given, `expert_ffn`
    /// to `ffn` when `experts` is given.
    ///
    /// ```
    /// use tempra_llm::testing::ModelShape;
    ///
    /// let s = ModelShape::parse("dim=128,layers=1,heads=2,ffn=256")?;
    /// assert_eq!((s.dim, s.kv_heads, s.vocab), (128, 2, 384));
    /// assert_eq!(ModelShape::parse("1b")?, ModelShape::SIZE_1B);
    /// # Ok::<(), tempra_llm::LlmError>(())
    /// ```
    pub fn parse(text: &str) -> Result<ModelShape> {
        match text {
            "tiny" => return Ok(Self::TINY),
            "110m" => return Ok(Self::SIZE_110M),
            "1b" => return Ok(Self::SIZE_1B),
            "tiny-moe" => return Ok(Self::TINY_MOE),
            "moe-2b" => return Ok(Self::SIZE_MOE_2B),
            _ => {}
        }
        let bad = |what: String| LlmError::Argument {
            what: format!("model shape `{text}`: {what}"),
        };
        let mut shape = Self::TINY;
        let mut kv_given = false;
        let mut expert_ffn_given = false;
        for part in text.split(',') {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("`{part}` is not key=value (or use tiny, 110m, 1b)")))?;
            if key == "tied" {
                shape.tied = value
                    .parse()
                    .map_err(|_| bad(format!("tied={value} is not true/false")))?;
                continue;
            }
            let n: usize = value
                .parse()
                .map_err(|_| bad(format!("{key}={value} is not a count")))?;
            match key {
                "dim" => shape.dim = n,
                "layers" => shape.layers = n,
                "heads" => shape.heads = n,
                "kv_heads" => {
                    shape.kv_heads = n;
                    kv_given = true;
                }
                "ffn" => shape.ffn = n,
                "vocab" => shape.vocab = n,
                "context" => shape.context = n,
                "experts" => shape.experts = n,
                "experts_used" => shape.experts_used = n,
                "expert_ffn" => {
                    shape.expert_ffn = n;
                    expert_ffn_given = true;
                }
                _ => return Err(bad(format!("unknown key `{key}`"))),
            }
        }
        if !kv_given {
            shape.kv_heads = shape.heads;
        }
        if shape.experts > 0 && !expert_ffn_given {
            shape.expert_ffn = shape.ffn;
        }
        shape.validate().map_err(bad)?;
        Ok(shape)
    }

    /// Checks the sizes are consistent: non-zero, heads dividing `dim` into even head
    /// sizes, KV heads dividing heads, a vocabulary above the 259 fixed tokens.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let s = self;
        if [s.dim, s.layers, s.heads, s.kv_heads, s.ffn, s.context].contains(&0) {
            return Err("every size must be positive".into());
        }
        if !s.dim.is_multiple_of(s.heads) || !(s.dim / s.heads).is_multiple_of(2) {
            return Err(format!(
                "{} heads must split dim {} into even head sizes",
                s.heads, s.dim
            ));
        }
        if !s.heads.is_multiple_of(s.kv_heads) {
            return Err(format!(
                "{} KV heads must divide {} heads",
                s.kv_heads, s.heads
            ));
        }
        if s.experts > 0 && !(1..=s.experts).contains(&s.experts_used) {
            return Err(format!(
                "{} experts used of {} (at least one, at most all)",
                s.experts_used, s.experts
            ));
        }
        if s.experts > 0 && s.expert_ffn == 0 {
            return Err("an expert FFN width must be positive".into());
        }
        if s.vocab <= SPECIAL_AND_BYTE_TOKENS {
            return Err(format!(
                "vocab {} must exceed the {SPECIAL_AND_BYTE_TOKENS} special and byte tokens",
                s.vocab
            ));
        }
        Ok(())
    }

    /// `dim / heads`.
    pub fn head_dim(&self) -> usize {
        self.dim / self.heads
    }

    /// Whether the FFNs are a mixture of experts.
    pub fn is_moe(&self) -> bool {
        self.experts > 0
    }

    /// Parameters (elements of all tensors).
    pub fn parameter_count(&self) -> u64 {
        self.count_parameters(self.experts)
    }

    /// Parameters one token reads (the chosen experts' FFNs only; every parameter of a
    /// dense model).
    pub fn active_parameter_count(&self) -> u64 {
        self.count_parameters(self.experts_used)
    }

    /// Parameters with `experts` experts' FFNs per block (a dense FFN when the model has
    /// none), plus the routers.
    fn count_parameters(&self, experts: usize) -> u64 {
        let (d, v) = (self.dim as u64, self.vocab as u64);
        let kv = (self.kv_heads * self.head_dim()) as u64;
        let ffn = if self.is_moe() {
            self.experts as u64 * d + experts as u64 * 3 * self.expert_ffn as u64 * d
        } else {
            3 * self.ffn as u64 * d
        };
        let block = 2 * d + 2 * d * d + 2 * kv * d + ffn;
        v * d * (if self.tied { 1 } else { 2 }) + d + self.layers as u64 * block
    }
}

impl fmt::Display for ModelShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dim={},layers={},heads={},kv_heads={},ffn={},vocab={},context={},tied={}",
            self.dim,
            self.layers,
            self.heads,
            self.kv_heads,
            self.ffn,
            self.vocab,
            self.context,
            self.tied
        )?;
        if self.is_moe() {
            write!(
                f,
                ",experts={},experts_used={},expert_ffn={}",
                self.experts, self.experts_used, self.expert_ffn
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_parses_back() {
        for s in [ModelShape::TINY, ModelShape::SIZE_110M, ModelShape::SIZE_1B] {
            assert_eq!(ModelShape::parse(&s.to_string()).unwrap(), s);
        }
        assert_eq!(ModelShape::SIZE_1B.parameter_count(), 1_100_048_384);
    }

    #[test]
    fn bad_shapes_are_errors() {
        for text in [
            "",
            "huge",
            "dim=0",
            "dim=100,heads=3",
            "heads=4,kv_heads=3",
            "vocab=100",
            "dim=x",
            "color=red",
            "tied=maybe",
        ] {
            assert!(ModelShape::parse(text).is_err(), "{text}");
        }
    }
}
