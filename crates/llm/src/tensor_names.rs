//! GGUF tensor names (llama.cpp's `LLM_TENSOR_*` names): parse `blk.3.attn_q.weight`
//! into its parts and build names from parts, so engines never format names by hand.

use std::fmt;

/// A tensor that appears once per model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalTensor {
    /// `token_embd`: the token embedding `[vocab, dim]`.
    TokenEmbd,
    /// `output_norm`: the final norm `[dim]`.
    OutputNorm,
    /// `output`: the classifier `[vocab, dim]` (absent when tied to `token_embd`).
    Output,
    /// `rope_freqs`: per-pair frequency factors (Llama 3.1 rope scaling).
    RopeFreqs,
    /// `rope_factors_long`: LongRoPE's per-pair factors past the original context.
    RopeFactorsLong,
    /// `rope_factors_short`: LongRoPE's per-pair factors within the original context.
    RopeFactorsShort,
    /// `position_embd`: learned absolute position embeddings `[context, dim]` (BERT).
    PositionEmbd,
    /// `token_types`: token-type (segment) embeddings `[types, dim]` (BERT).
    TokenTypes,
    /// `token_embd_norm`: the layer norm of the summed embeddings `[dim]` (BERT).
    TokenEmbdNorm,
}

/// A tensor that appears once per transformer block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockTensor {
    /// `attn_norm`: the pre-attention norm.
    AttnNorm,
    /// `attn_q`: the query projection.
    AttnQ,
    /// `attn_k`: the key projection.
    AttnK,
    /// `attn_v`: the value projection.
    AttnV,
    /// `attn_qkv`: fused query/key/value projection.
    AttnQkv,
    /// `attn_output`: the attention output projection.
    AttnOutput,
    /// `attn_q_norm`: per-head query norm (Qwen3, Gemma3).
    AttnQNorm,
    /// `attn_k_norm`: per-head key norm (Qwen3, Gemma3).
    AttnKNorm,
    /// `post_attention_norm`: the norm after attention (Gemma2/3).
    PostAttentionNorm,
    /// `ffn_norm`: the pre-feed-forward norm.
    FfnNorm,
    /// `ffn_gate`: the gate projection (llama.c `w1`).
    FfnGate,
    /// `ffn_up`: the up projection (llama.c `w3`).
    FfnUp,
    /// `ffn_down`: the down projection (llama.c `w2`).
    FfnDown,
    /// `post_ffw_norm`: the norm after the feed-forward (Gemma2/3).
    PostFfwNorm,
    /// `attn_output_norm`: the layer norm after the attention's residual add (BERT).
    AttnOutputNorm,
    /// `layer_output_norm`: the layer norm after the FFN's residual add (BERT).
    LayerOutputNorm,
    /// `ffn_gate_inp`: a mixture of experts' router `[experts, dim]`.
    FfnGateInp,
    /// `ffn_gate_exps`: the experts' stacked gate projections `[experts, ffn, dim]`.
    FfnGateExps,
    /// `ffn_up_exps`: the experts' stacked up projections `[experts, ffn, dim]`.
    FfnUpExps,
    /// `ffn_down_exps`: the experts' stacked down projections `[experts, dim, ffn]`.
    FfnDownExps,
    /// `ffn_gate_shexp`: the shared expert's gate projection (Qwen2-MoE).
    FfnGateShexp,
    /// `ffn_up_shexp`: the shared expert's up projection.
    FfnUpShexp,
    /// `ffn_down_shexp`: the shared expert's down projection.
    FfnDownShexp,
    /// `ffn_gate_inp_shexp`: the shared expert's sigmoid gate `[dim]`.
    FfnGateInpShexp,
    /// `attn_sinks`: one attention-sink logit per query head (gpt-oss).
    AttnSinks,
}

impl GlobalTensor {
    /// Every global tensor.
    pub const ALL: [GlobalTensor; 9] = [
        GlobalTensor::TokenEmbd,
        GlobalTensor::OutputNorm,
        GlobalTensor::Output,
        GlobalTensor::RopeFreqs,
        GlobalTensor::RopeFactorsLong,
        GlobalTensor::RopeFactorsShort,
        GlobalTensor::PositionEmbd,
        GlobalTensor::TokenTypes,
        GlobalTensor::TokenEmbdNorm,
    ];

    /// The name stem (`token_embd`).
    pub const fn stem(self) -> &'static str {
        match self {
            GlobalTensor::TokenEmbd => "token_embd",
            GlobalTensor::OutputNorm => "output_norm",
            GlobalTensor::Output => "output",
            GlobalTensor::RopeFreqs => "rope_freqs",
            GlobalTensor::RopeFactorsLong => "rope_factors_long",
            GlobalTensor::RopeFactorsShort => "rope_factors_short",
            GlobalTensor::PositionEmbd => "position_embd",
            GlobalTensor::TokenTypes => "token_types",
            GlobalTensor::TokenEmbdNorm => "token_embd_norm",
        }
    }
}

impl BlockTensor {
    /// Every block tensor.
    pub const ALL: [BlockTensor; 25] = [
        BlockTensor::AttnNorm,
        BlockTensor::AttnQ,
        BlockTensor::AttnK,
        BlockTensor::AttnV,
        BlockTensor::AttnQkv,
        BlockTensor::AttnOutput,
        BlockTensor::AttnQNorm,
        BlockTensor::AttnKNorm,
        BlockTensor::PostAttentionNorm,
        BlockTensor::FfnNorm,
        BlockTensor::FfnGate,
        BlockTensor::FfnUp,
        BlockTensor::FfnDown,
        BlockTensor::PostFfwNorm,
        BlockTensor::AttnOutputNorm,
        BlockTensor::LayerOutputNorm,
        BlockTensor::FfnGateInp,
        BlockTensor::FfnGateExps,
        BlockTensor::FfnUpExps,
        BlockTensor::FfnDownExps,
        BlockTensor::FfnGateShexp,
        BlockTensor::FfnUpShexp,
        BlockTensor::FfnDownShexp,
        BlockTensor::FfnGateInpShexp,
        BlockTensor::AttnSinks,
    ];

    /// The name stem after `blk.N.` (`attn_q`).
    pub const fn stem(self) -> &'static str {
        match self {
            BlockTensor::AttnNorm => "attn_norm",
            BlockTensor::AttnQ => "attn_q",
            BlockTensor::AttnK => "attn_k",
            BlockTensor::AttnV => "attn_v",
            BlockTensor::AttnQkv => "attn_qkv",
            BlockTensor::AttnOutput => "attn_output",
            BlockTensor::AttnQNorm => "attn_q_norm",
            BlockTensor::AttnKNorm => "attn_k_norm",
            BlockTensor::PostAttentionNorm => "post_attention_norm",
            BlockTensor::FfnNorm => "ffn_norm",
            BlockTensor::FfnGate => "ffn_gate",
            BlockTensor::FfnUp => "ffn_up",
            BlockTensor::FfnDown => "ffn_down",
            BlockTensor::PostFfwNorm => "post_ffw_norm",
            BlockTensor::AttnOutputNorm => "attn_output_norm",
            BlockTensor::LayerOutputNorm => "layer_output_norm",
            BlockTensor::FfnGateInp => "ffn_gate_inp",
            BlockTensor::FfnGateExps => "ffn_gate_exps",
            BlockTensor::FfnUpExps => "ffn_up_exps",
            BlockTensor::FfnDownExps => "ffn_down_exps",
            BlockTensor::FfnGateShexp => "ffn_gate_shexp",
            BlockTensor::FfnUpShexp => "ffn_up_shexp",
            BlockTensor::FfnDownShexp => "ffn_down_shexp",
            BlockTensor::FfnGateInpShexp => "ffn_gate_inp_shexp",
            BlockTensor::AttnSinks => "attn_sinks",
        }
    }
}

/// `.weight` or `.bias`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorSuffix {
    /// `.weight`.
    Weight,
    /// `.bias`.
    Bias,
}

impl TensorSuffix {
    /// `weight` or `bias`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TensorSuffix::Weight => "weight",
            TensorSuffix::Bias => "bias",
        }
    }
}

/// Which tensor a name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorRole {
    /// A per-model tensor.
    Global(GlobalTensor),
    /// A per-block tensor of block `layer`.
    Block {
        /// The block index.
        layer: usize,
        /// Which tensor of the block.
        tensor: BlockTensor,
    },
}

/// A parsed tensor name: role plus suffix.
///
/// ```
/// use tempra_llm::tensor_names::{BlockTensor, TensorName, TensorRole, TensorSuffix};
///
/// let n = TensorName::parse("blk.3.attn_q.weight").unwrap();
/// assert_eq!(n.role, TensorRole::Block { layer: 3, tensor: BlockTensor::AttnQ });
/// assert_eq!(n.suffix, TensorSuffix::Weight);
/// assert_eq!(n.to_string(), "blk.3.attn_q.weight");
/// assert_eq!(TensorName::parse("blk.x.attn_q.weight"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorName {
    /// What the tensor is.
    pub role: TensorRole,
    /// `.weight` or `.bias`.
    pub suffix: TensorSuffix,
}

impl TensorName {
    /// Parses a llama.cpp tensor name; `None` for names this module does not know.
    pub fn parse(name: &str) -> Option<TensorName> {
        let (stem, suffix) = if let Some(stem) = name.strip_suffix(".weight") {
            (stem, TensorSuffix::Weight)
        } else {
            (name.strip_suffix(".bias")?, TensorSuffix::Bias)
        };
        let role = if let Some(rest) = stem.strip_prefix("blk.") {
            let (layer, tensor) = rest.split_once('.')?;
            if layer.is_empty()
                || !layer.bytes().all(|b| b.is_ascii_digit())
                || (layer.len() > 1 && layer.starts_with('0'))
            {
                return None;
            }
            let layer = layer.parse().ok()?;
            let tensor = BlockTensor::ALL.into_iter().find(|t| t.stem() == tensor)?;
            TensorRole::Block { layer, tensor }
        } else {
            TensorRole::Global(GlobalTensor::ALL.into_iter().find(|t| t.stem() == stem)?)
        };
        Some(TensorName { role, suffix })
    }

    /// The block index, for a per-block tensor.
    pub fn layer(&self) -> Option<usize> {
        match self.role {
            TensorRole::Block { layer, .. } => Some(layer),
            TensorRole::Global(_) => None,
        }
    }
}

impl fmt::Display for TensorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.role {
            TensorRole::Global(t) => write!(f, "{}.{}", t.stem(), self.suffix.as_str()),
            TensorRole::Block { layer, tensor } => {
                write!(f, "blk.{layer}.{}.{}", tensor.stem(), self.suffix.as_str())
            }
        }
    }
}

/// The name of a global tensor's weight (`token_embd.weight`).
pub fn global_weight(tensor: GlobalTensor) -> String {
    format!("{}.weight", tensor.stem())
}

/// The name of block `layer`'s `tensor` weight (`blk.0.attn_q.weight`).
pub fn block_weight(layer: usize, tensor: BlockTensor) -> String {
    format!("blk.{layer}.{}.weight", tensor.stem())
}

/// The name of a global tensor's bias (`token_embd_norm.bias`).
pub fn global_bias(tensor: GlobalTensor) -> String {
    format!("{}.bias", tensor.stem())
}

/// The name of block `layer`'s `tensor` bias (`blk.0.attn_q.bias`).
pub fn block_bias(layer: usize, tensor: BlockTensor) -> String {
    format!("blk.{layer}.{}.bias", tensor.stem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for t in GlobalTensor::ALL {
            let name = global_weight(t);
            assert_eq!(TensorName::parse(&name).unwrap().to_string(), name);
        }
        for t in BlockTensor::ALL {
            for name in [block_weight(17, t), block_bias(0, t)] {
                let parsed = TensorName::parse(&name).unwrap();
                assert_eq!(parsed.to_string(), name);
            }
        }
    }

    #[test]
    fn unknown_names_are_none() {
        for name in [
            "",
            "weight",
            "blk.0.weight",
            "blk..attn_q.weight",
            "blk.01.attn_q.weight",
            "blk.0.attn_x.weight",
            "token_embd",
            "foo.weight",
            "blk.99999999999999999999999.attn_q.weight",
        ] {
            assert_eq!(TensorName::parse(name), None, "{name}");
        }
    }
}
