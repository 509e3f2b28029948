//! Random-weight llama models written as GGUF, streaming: tensors are generated, converted
//! and written a batch of rows at a time, so even the 1B shape needs only a few MiB.

use std::io::Write;
use std::sync::Arc;

use tempra_tensor::random::SplitMix64;
use tempra_tensor::{DType, Shape};

use super::model_shape::ModelShape;
use super::synthetic_vocab::SyntheticVocab;
use crate::error::{LlmError, Result};
use crate::gguf::{GgufWriter, Limits, Metadata, TensorSpec, keys};
use crate::model_config::Arch;
use crate::model_file::ModelFile;
use crate::quantize::{QUANTIZATION_VERSION, QuantType, TensorTypePlanner, encode_rows_parallel};
use crate::tensor_names::{BlockTensor, block_weight};

/// Values generated per batch.
const BATCH_VALUES: usize = 1 << 20;

/// What random model to make.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomModelSpec {
    /// The architecture (only [`Arch::Llama`] so far).
    pub arch: Arch,
    /// The sizes.
    pub shape: ModelShape,
    /// The file type: F32, F16, BF16 or a quantization with llama.cpp's per-tensor mix.
    pub qtype: QuantType,
    /// The seed: the same spec gives the same bytes.
    pub seed: u64,
}

impl RandomModelSpec {
    /// An f32 llama model of `shape` with seed 0.
    pub fn llama(shape: ModelShape) -> Self {
        Self {
            arch: Arch::Llama,
            shape,
            qtype: QuantType::F32,
            seed: 0,
        }
    }

    /// The same spec with file type `qtype`.
    pub fn with_qtype(mut self, qtype: QuantType) -> Self {
        self.qtype = qtype;
        self
    }

    /// The same spec with `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks the spec can be made: a supported architecture and a consistent shape.
    ///
    /// Errors: [`LlmError::Argument`] saying which.
    pub fn validate(&self) -> Result<()> {
        if self.arch != Arch::Llama {
            return Err(LlmError::Argument {
                what: format!(
                    "random models of architecture `{}` are not supported yet (only llama)",
                    self.arch
                ),
            });
        }
        self.shape.validate().map_err(|what| LlmError::Argument {
            what: format!("model shape: {what}"),
        })
    }

    /// The metadata: `llama` hyperparameters and a [`SyntheticVocab`] tokenizer.
    pub fn metadata(&self) -> Result<Metadata> {
        let s = &self.shape;
        let mut md = Metadata::new();
        let arch = |suffix| keys::arch_key("llama", suffix);
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        md.set(keys::GENERAL_ARCHITECTURE, "llama");
        md.set(keys::GENERAL_NAME, format!("tempra-random-{}", self.qtype));
        md.set(keys::GENERAL_FILE_TYPE, self.qtype.file_type());
        if self.qtype.base_dtype().is_quantized() {
            md.set(keys::GENERAL_QUANTIZATION_VERSION, QUANTIZATION_VERSION);
        }
        md.set(arch(keys::CONTEXT_LENGTH), n(s.context));
        md.set(arch(keys::EMBEDDING_LENGTH), n(s.dim));
        md.set(arch(keys::BLOCK_COUNT), n(s.layers));
        md.set(arch(keys::FEED_FORWARD_LENGTH), n(s.ffn));
        md.set(arch(keys::HEAD_COUNT), n(s.heads));
        md.set(arch(keys::HEAD_COUNT_KV), n(s.kv_heads));
        md.set(arch(keys::ROPE_DIMENSION_COUNT), n(s.head_dim()));
        md.set(arch(keys::ROPE_FREQ_BASE), 10_000.0f32);
        md.set(arch(keys::RMS_EPS), 1e-5f32);
        md.set(arch(keys::VOCAB_SIZE), n(s.vocab));
        SyntheticVocab::new(s.vocab)?.write_metadata(&mut md);
        Ok(md)
    }

    /// The tensors in file order, all F32 (before the quantization plan).
    pub fn f32_tensors(&self) -> Result<Vec<TensorSpec>> {
        let s = &self.shape;
        let kv = s.kv_heads * s.head_dim();
        let spec = |name: String, dims: &[usize]| -> Result<TensorSpec> {
            Ok(TensorSpec::new(name, Shape::new(dims)?, DType::F32))
        };
        let mut specs = vec![spec("token_embd.weight".into(), &[s.vocab, s.dim])?];
        for l in 0..s.layers {
            let b = |t| block_weight(l, t);
            specs.push(spec(b(BlockTensor::AttnNorm), &[s.dim])?);
            specs.push(spec(b(BlockTensor::AttnQ), &[s.dim, s.dim])?);
            specs.push(spec(b(BlockTensor::AttnK), &[kv, s.dim])?);
            specs.push(spec(b(BlockTensor::AttnV), &[kv, s.dim])?);
            specs.push(spec(b(BlockTensor::AttnOutput), &[s.dim, s.dim])?);
            specs.push(spec(b(BlockTensor::FfnNorm), &[s.dim])?);
            specs.push(spec(b(BlockTensor::FfnGate), &[s.ffn, s.dim])?);
            specs.push(spec(b(BlockTensor::FfnUp), &[s.ffn, s.dim])?);
            specs.push(spec(b(BlockTensor::FfnDown), &[s.dim, s.ffn])?);
        }
        specs.push(spec("output_norm.weight".into(), &[s.dim])?);
        if !s.tied {
            specs.push(spec("output.weight".into(), &[s.vocab, s.dim])?);
        }
        Ok(specs)
    }
}

/// Writes the model `spec` describes to `out` as GGUF; returns `out`.
///
/// Weights are uniform with variance `1 / row_len` (activations stay O(1) through
/// the blocks); norm weights are near 1. Each tensor has its own generator seeded from
/// `spec.seed` and its index.
///
/// Errors: an unsupported architecture or an inconsistent shape is an
/// [`LlmError::Argument`]; write failures are [`LlmError::Io`].
pub fn write_random_model<W: Write>(spec: &RandomModelSpec, out: W) -> Result<W> {
    spec.validate()?;
    let metadata = spec.metadata()?;
    let f32_specs = spec.f32_tensors()?;
    let mut planner = TensorTypePlanner::new(spec.qtype, &metadata, &f32_specs);
    let specs: Vec<TensorSpec> = f32_specs
        .iter()
        .map(|s| TensorSpec {
            dtype: planner.plan(s).to,
            ..s.clone()
        })
        .collect();
    let mut writer = GgufWriter::new(out, &metadata, specs.clone())?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut values = Vec::new();
    let mut encoded = Vec::new();
    for (index, t) in specs.iter().enumerate() {
        let mut rng =
            SplitMix64::new(spec.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let row_len = t.row_len();
        let is_norm = t.shape.rank() == 1;
        let half_width = (3.0 / row_len as f64).sqrt() as f32;
        let row_bytes = t.dtype.bytes_for(row_len).unwrap_or(0);
        let batch_rows = (BATCH_VALUES / row_len.max(1)).max(1);
        let mut rows_left = t.elem_count() / row_len.max(1);
        while rows_left > 0 {
            let rows = rows_left.min(batch_rows);
            values.clear();
            values.extend((0..rows * row_len).map(|_| {
                let u = (rng.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32) * 2.0 - 1.0;
                if is_norm {
                    1.0 + 0.1 * u
                } else {
                    u * half_width
                }
            }));
            encoded.resize(rows * row_bytes, 0);
            encode_rows_parallel(t.dtype, row_len, &values, &mut encoded, threads)?;
            writer.write_data(&encoded)?;
            rows_left -= rows;
        }
    }
    writer.finish()
}

/// The model `spec` describes, made in memory and opened: for tests that need a model
/// file without touching the disk.
pub fn random_model(spec: &RandomModelSpec) -> Result<ModelFile> {
    let bytes = write_random_model(spec, Vec::new())?;
    ModelFile::from_gguf_bytes(Arc::new(bytes), &Limits::default())
}
