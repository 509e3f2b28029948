//! Random-weight llama models written as GGUF, streaming: tensors are generated, converted
//! and written a batch of rows at a time, so even the 1B shape needs only a few MiB.

use std::io::Write;
use std::sync::Arc;

use tempra_tensor::random::SplitMix64;
use tempra_tensor::{DType, Shape, quant};

use super::model_shape::ModelShape;
use super::synthetic_vocab::{SPECIAL_AND_BYTE_TOKENS, SyntheticVocab};
use crate::error::{LlmError, Result};
use crate::gguf::{GgufWriter, Limits, Metadata, TensorSpec, TokenType, keys};
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
    /// If set, every tensor `qtype`'s plan quantizes is stored in this block format
    /// instead, whatever the mix says; a format tempra cannot quantize to (IQ1, IQ2, IQ3)
    /// gets random blocks with the root mean square the weights would have had.
    pub weight_dtype: Option<DType>,
    /// The seed: the same spec gives the same bytes.
    pub seed: u64,
    /// Control tokens (chat markers such as `<|im_start|>`) that take the places of the
    /// vocabulary's last pieces.
    pub control_tokens: Vec<String>,
    /// A real tokenizer (the `tokenizer.*` keys of a GGUF) instead of the synthetic
    /// vocabulary; `shape.vocab` is its token count.
    pub tokenizer: Option<Metadata>,
}

impl RandomModelSpec {
    /// An f32 llama model of `shape` with seed 0.
    pub fn llama(shape: ModelShape) -> Self {
        Self {
            arch: Arch::Llama,
            shape,
            qtype: QuantType::F32,
            weight_dtype: None,
            seed: 0,
            control_tokens: Vec::new(),
            tokenizer: None,
        }
    }

    /// The same spec with every quantized tensor in `dtype` (see
    /// [`RandomModelSpec::weight_dtype`]); `qtype` becomes a block type if it was not one,
    /// so that the plan quantizes.
    pub fn with_weight_dtype(mut self, dtype: DType) -> Self {
        if !self.qtype.base_dtype().is_quantized() {
            self.qtype = QuantType::Q8_0;
        }
        self.weight_dtype = Some(dtype);
        self
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

    /// The same spec with `tokens` as control tokens at the end of the vocabulary.
    pub fn with_control_tokens(mut self, tokens: &[&str]) -> Self {
        self.control_tokens = tokens.iter().map(|t| (*t).to_owned()).collect();
        self
    }

    /// The same spec with the tokenizer of `metadata` (its `tokenizer.*` keys, such as
    /// llama.cpp's `ggml-vocab-*.gguf` files hold): the vocabulary size becomes its
    /// token count.
    ///
    /// Errors: [`LlmError::MissingKey`] when it has no `tokenizer.ggml.tokens`.
    pub fn with_tokenizer_from(mut self, metadata: &Metadata) -> Result<Self> {
        let count = metadata.get_string_array(keys::TOKENIZER_TOKENS)?.len();
        let mut tokenizer = Metadata::new();
        for (k, v) in metadata.iter().filter(|(k, _)| k.starts_with("tokenizer.")) {
            tokenizer.set(k, v.clone());
        }
        self.tokenizer = Some(tokenizer);
        self.shape.vocab = count;
        Ok(self)
    }

    /// Checks the spec can be made: a supported architecture and a consistent shape.
    ///
    /// Errors: [`LlmError::Argument`] saying which.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = self.weight_dtype
            && (!d.is_quantized() || matches!(d, DType::Q8_1 | DType::Q8K))
        {
            return Err(LlmError::Argument {
                what: format!("weight dtype {d} is not a block format of weights"),
            });
        }
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
        })?;
        if self.tokenizer.is_none()
            && self.shape.vocab <= SPECIAL_AND_BYTE_TOKENS + self.control_tokens.len()
        {
            return Err(LlmError::Argument {
                what: format!(
                    "a vocabulary of {} tokens has no room for {} control tokens",
                    self.shape.vocab,
                    self.control_tokens.len()
                ),
            });
        }
        Ok(())
    }

    /// The metadata: `llama` hyperparameters and a [`SyntheticVocab`] tokenizer (or the
    /// one given to [`RandomModelSpec::with_tokenizer_from`]).
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
        // A Mixtral-form file's FFN width is its experts' (llama.cpp reads no other key
        // for `llama`).
        let ffn = if s.is_moe() { s.expert_ffn } else { s.ffn };
        md.set(arch(keys::FEED_FORWARD_LENGTH), n(ffn));
        md.set(arch(keys::HEAD_COUNT), n(s.heads));
        md.set(arch(keys::HEAD_COUNT_KV), n(s.kv_heads));
        md.set(arch(keys::ROPE_DIMENSION_COUNT), n(s.head_dim()));
        md.set(arch(keys::ROPE_FREQ_BASE), 10_000.0f32);
        md.set(arch(keys::RMS_EPS), 1e-5f32);
        md.set(arch(keys::VOCAB_SIZE), n(s.vocab));
        if s.is_moe() {
            md.set(arch(keys::EXPERT_COUNT), n(s.experts));
            md.set(arch(keys::EXPERT_USED_COUNT), n(s.experts_used));
            md.set(arch(keys::EXPERT_FEED_FORWARD_LENGTH), n(s.expert_ffn));
        }
        if let Some(tokenizer) = &self.tokenizer {
            for (k, v) in tokenizer.iter() {
                md.set(k, v.clone());
            }
            return Ok(md);
        }
        let mut vocab = SyntheticVocab::new(s.vocab)?;
        let first = vocab.tokens.len().saturating_sub(self.control_tokens.len());
        for (i, text) in (first..).zip(&self.control_tokens) {
            vocab.tokens[i] = text.clone().into_bytes();
            vocab.token_types[i] = TokenType::Control;
            vocab.scores[i] = 0.0;
        }
        vocab.write_metadata(&mut md);
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
            if s.is_moe() {
                let (e, f) = (s.experts, s.expert_ffn);
                specs.push(spec(b(BlockTensor::FfnGateInp), &[e, s.dim])?);
                specs.push(spec(b(BlockTensor::FfnGateExps), &[e, f, s.dim])?);
                specs.push(spec(b(BlockTensor::FfnUpExps), &[e, f, s.dim])?);
                specs.push(spec(b(BlockTensor::FfnDownExps), &[e, s.dim, f])?);
                continue;
            }
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
        .map(|s| {
            let planned = planner.plan(s).to;
            let dtype = match spec.weight_dtype {
                Some(d) if planned != s.dtype => d,
                _ => planned,
            };
            TensorSpec { dtype, ..s.clone() }
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
            if t.dtype.is_quantized() && !quant::has_quantizer(t.dtype) {
                // Uniform values on ±half_width have a root mean square of half_width / √3.
                let rms = half_width / 3f32.sqrt();
                let blocks = rows * row_len / t.dtype.block_len();
                encoded = quant::random_blocks(t.dtype, blocks, rms, rng.next_u64())?;
            } else {
                encoded.resize(rows * row_bytes, 0);
                encode_rows_parallel(t.dtype, row_len, &values, &mut encoded, threads)?;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Vocabulary;

    #[test]
    fn a_borrowed_tokenizer_replaces_the_synthetic_one() -> Result<()> {
        let donor = RandomModelSpec::llama(ModelShape {
            vocab: 300,
            ..ModelShape::TINY
        })
        .with_control_tokens(&["<|im_start|>"])
        .metadata()?;
        let spec = RandomModelSpec::llama(ModelShape::TINY).with_tokenizer_from(&donor)?;
        assert_eq!(spec.shape.vocab, 300);
        spec.validate()?;
        let md = spec.metadata()?;
        let mut copied = 0;
        for (key, value) in donor.iter().filter(|(k, _)| k.starts_with("tokenizer.")) {
            assert_eq!(md.get(key), Some(value), "{key}");
            copied += 1;
        }
        assert!(copied >= 3, "{copied} tokenizer keys");
        let vocab = Vocabulary::from_gguf(&md)?;
        assert_eq!(vocab.len(), 300);
        assert_eq!(vocab.token_id(b"<|im_start|>"), Some(299));
        assert!(matches!(
            RandomModelSpec::llama(ModelShape::TINY).with_tokenizer_from(&Metadata::new()),
            Err(LlmError::MissingKey { .. })
        ));
        Ok(())
    }
}
