//! The demo model's shape, its GGUF metadata, freshly initialised trainable parameters,
//! and writing the trained parameters (with the tokenizer) as a GGUF file.

use std::io::Write;

use tempra_autograd::{ParamStore, Var};
use tempra_tensor::{DType, ExecContext, Shape};

use crate::engine::{DenseFfn, FeedForward, LayerWeights, ModelWeights};
use crate::error::{LlmError, Result};
use crate::gguf::{GgufWriter, Metadata, TensorSpec, keys};
use crate::tensor_names::{BlockTensor, GlobalTensor, block_weight, global_weight};
use crate::tokenizer::Vocabulary;

/// The sizes of the demo model: a Llama-architecture transformer with a tied output
/// head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoShape {
    /// Model width.
    pub dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Attention heads (queries and keys/values alike).
    pub heads: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// Context length (the longest training window).
    pub context: usize,
}

impl DemoShape {
    /// The shape the embedded demo model was trained with.
    pub const DEFAULT: DemoShape = DemoShape {
        dim: 128,
        layers: 4,
        heads: 4,
        ffn: 384,
        context: 256,
    };

    /// Checks the sizes are usable: all positive, `dim` a multiple of `heads` with an
    /// even head size (rope rotates pairs).
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(LlmError::Argument { what });
        if self.dim == 0 || self.layers == 0 || self.heads == 0 || self.ffn == 0 {
            return bad(format!("demo model sizes must be positive: {self:?}"));
        }
        if self.context < 2 {
            return bad(format!(
                "the context must be at least 2, not {}",
                self.context
            ));
        }
        if !self.dim.is_multiple_of(self.heads) || !(self.dim / self.heads).is_multiple_of(2) {
            return bad(format!(
                "dim {} must split into {} heads of an even size",
                self.dim, self.heads
            ));
        }
        Ok(())
    }

    /// The head size.
    pub fn head_dim(&self) -> usize {
        self.dim / self.heads
    }

    /// The parameter count with a vocabulary of `vocab` tokens.
    pub fn parameter_count(&self, vocab: usize) -> usize {
        tensor_specs(self, vocab)
            .iter()
            .map(|(_, dims)| dims.iter().product::<usize>())
            .sum()
    }
}

/// Every tensor of the model in file order: name and dims.
fn tensor_specs(shape: &DemoShape, vocab: usize) -> Vec<(String, Vec<usize>)> {
    let (d, f) = (shape.dim, shape.ffn);
    let mut specs = vec![(global_weight(GlobalTensor::TokenEmbd), vec![vocab, d])];
    for l in 0..shape.layers {
        let b = |t| block_weight(l, t);
        specs.push((b(BlockTensor::AttnNorm), vec![d]));
        specs.push((b(BlockTensor::AttnQ), vec![d, d]));
        specs.push((b(BlockTensor::AttnK), vec![d, d]));
        specs.push((b(BlockTensor::AttnV), vec![d, d]));
        specs.push((b(BlockTensor::AttnOutput), vec![d, d]));
        specs.push((b(BlockTensor::FfnNorm), vec![d]));
        specs.push((b(BlockTensor::FfnGate), vec![f, d]));
        specs.push((b(BlockTensor::FfnUp), vec![f, d]));
        specs.push((b(BlockTensor::FfnDown), vec![d, f]));
    }
    specs.push((global_weight(GlobalTensor::OutputNorm), vec![d]));
    specs
}

/// The GGUF metadata of a demo model: `llama` hyperparameters, the tokenizer, a 64-byte
/// data alignment (so an embedded copy aligned to 64 bytes is used in place), and
/// `training` notes (`tempra.demo.*` keys) describing how it was made.
pub fn demo_metadata(shape: &DemoShape, vocab: &Vocabulary, notes: &[(&str, String)]) -> Metadata {
    let mut md = Metadata::new();
    let arch = |suffix| keys::arch_key("llama", suffix);
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    md.set(keys::GENERAL_ARCHITECTURE, "llama");
    md.set(keys::GENERAL_NAME, "tempra-demo-stories");
    md.set(keys::GENERAL_ALIGNMENT, 64u32);
    md.set(keys::GENERAL_FILE_TYPE, 1u32); // mostly F16
    md.set(arch(keys::CONTEXT_LENGTH), n(shape.context));
    md.set(arch(keys::EMBEDDING_LENGTH), n(shape.dim));
    md.set(arch(keys::BLOCK_COUNT), n(shape.layers));
    md.set(arch(keys::FEED_FORWARD_LENGTH), n(shape.ffn));
    md.set(arch(keys::HEAD_COUNT), n(shape.heads));
    md.set(arch(keys::HEAD_COUNT_KV), n(shape.heads));
    md.set(arch(keys::ROPE_DIMENSION_COUNT), n(shape.head_dim()));
    md.set(arch(keys::ROPE_FREQ_BASE), 10_000.0f32);
    md.set(arch(keys::RMS_EPS), 1e-5f32);
    md.set(arch(keys::VOCAB_SIZE), n(vocab.len()));
    vocab.write_gguf_metadata(&mut md);
    for (key, value) in notes {
        md.set(format!("tempra.demo.{key}"), value.clone());
    }
    md
}

/// Fresh trainable parameters for `shape`, named as in GGUF: matrices normal with std
/// 0.02 (the residual output projections scaled by `1/√(2·layers)`), norms 1.
pub fn init_params(
    ctx: &ExecContext,
    shape: &DemoShape,
    vocab: usize,
    seed: u64,
) -> Result<ParamStore> {
    shape.validate()?;
    let mut params = ParamStore::new();
    let residual_std = 0.02 / ((2 * shape.layers) as f64).sqrt();
    for (i, (name, dims)) in tensor_specs(shape, vocab).into_iter().enumerate() {
        let value = if dims.len() == 1 {
            ctx.full(&dims, DType::F32, 1.0)?
        } else {
            let std = if name.ends_with("attn_output.weight") || name.ends_with("ffn_down.weight") {
                residual_std
            } else {
                0.02
            };
            let seed = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            ctx.randn(&dims, DType::F32, 0.0, std, seed)?
        };
        params.add(&name, value)?;
    }
    Ok(params)
}

/// The parameters of `params` as the engine's [`ModelWeights`] (clones of the stored
/// variables: drop them before an optimizer step so updates stay in place).
pub fn weights_from_params(params: &ParamStore, shape: &DemoShape) -> Result<ModelWeights> {
    let get = |name: String| -> Result<Var> {
        params
            .get(&name)
            .cloned()
            .ok_or(LlmError::MissingTensor { name })
    };
    let mut layers = Vec::with_capacity(shape.layers);
    for l in 0..shape.layers {
        let b = |t| get(block_weight(l, t));
        layers.push(LayerWeights {
            attn_norm: Some(b(BlockTensor::AttnNorm)?),
            wq: b(BlockTensor::AttnQ)?,
            wk: b(BlockTensor::AttnK)?,
            wv: b(BlockTensor::AttnV)?,
            wo: b(BlockTensor::AttnOutput)?,
            bo: None,
            sinks: None,
            bq: None,
            bk: None,
            bv: None,
            q_norm: None,
            k_norm: None,
            post_attn_norm: None,
            ffn_norm: Some(b(BlockTensor::FfnNorm)?),
            ffn: FeedForward::Dense(DenseFfn {
                gate: Some(b(BlockTensor::FfnGate)?),
                up: b(BlockTensor::FfnUp)?,
                down: b(BlockTensor::FfnDown)?,
            }),
            post_ffn_norm: None,
        });
    }
    Ok(ModelWeights {
        token_embd: get(global_weight(GlobalTensor::TokenEmbd))?,
        output_norm: Some(get(global_weight(GlobalTensor::OutputNorm))?),
        output: None,
        rope_freqs: None,
        rope_factors_long: None,
        rope_factors_short: None,
        layers,
        encoder: None,
    })
}

/// Writes the model as GGUF to `out`: `metadata` (see [`demo_metadata`]) and the
/// parameters in file order, matrices as F16 and norms as F32. Returns `out`.
pub fn write_demo_gguf<W: Write>(
    params: &ParamStore,
    shape: &DemoShape,
    metadata: &Metadata,
    out: W,
) -> Result<W> {
    let vocab = metadata.get_usize(&keys::arch_key("llama", keys::VOCAB_SIZE))?;
    let mut specs = Vec::new();
    for (name, dims) in tensor_specs(shape, vocab) {
        let dtype = if dims.len() == 1 {
            DType::F32
        } else {
            DType::F16
        };
        specs.push(TensorSpec::new(name, Shape::new(&dims)?, dtype));
    }
    let mut writer = GgufWriter::new(out, metadata, specs.clone())?;
    for spec in &specs {
        let var = params
            .get(&spec.name)
            .ok_or_else(|| LlmError::MissingTensor {
                name: spec.name.clone(),
            })?;
        let values = var.tensor().to_vec_f32()?;
        let bytes: Vec<u8> = match spec.dtype {
            DType::F16 => values
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
            _ => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        };
        writer.write_data(&bytes)?;
    }
    writer.finish()
}
