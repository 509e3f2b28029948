//! llama2.c checkpoints: Karpathy's legacy `model.bin` format plus its `tokenizer.bin`,
//! opened as a [`ModelFile`] that looks exactly like its GGUF conversion.
//!
//! The checkpoint's f32 weights are used zero-copy from the memory mapping, under
//! llama.cpp's GGUF `llama` tensor names (`w1` → `ffn_gate`, `w2` → `ffn_down`, `w3` →
//! `ffn_up`). `wq`/`wk` are kept as stored: llama2.c rotates interleaved pairs, which is
//! GGUF `llama`'s rope layout. A shared classifier means no `output.weight` (engines use
//! `token_embd.weight`).
//!
//! ```no_run
//! use tempra_llm::ModelFile;
//!
//! let model = ModelFile::open_llama2c("stories260K.bin", "tok512.bin")?;
//! model.write_gguf(std::io::BufWriter::new(std::fs::File::create("stories260K.gguf").unwrap()))?;
//! # Ok::<(), tempra_llm::LlmError>(())
//! ```

mod checkpoint;
mod vocab;

pub use checkpoint::{HEADER_LEN, Llama2cConfig};
pub use vocab::{BOS_ID, EOS_ID, Llama2cVocab, UNK_ID};

use std::path::Path;

use crate::error::Result;
use crate::gguf::{Metadata, keys};
use crate::model_file::{ModelFile, ModelFormat, map_file};

/// llama2.c's RMSNorm epsilon.
pub const RMS_EPS: f32 = 1e-5;
/// llama2.c's RoPE base.
pub const ROPE_THETA: f32 = 10_000.0;
/// llama.cpp's `general.file_type` for an all-f32 model.
const FILE_TYPE_ALL_F32: u32 = 0;

/// The GGUF metadata of a llama2.c model: `llama` architecture keys (as llama.cpp's
/// `convert-llama2c-to-ggml` writes them, plus the rope base) and the vocabulary.
pub fn metadata(config: &Llama2cConfig, vocab: &Llama2cVocab, name: &str) -> Metadata {
    let mut md = Metadata::new();
    let arch = |suffix| keys::arch_key("llama", suffix);
    let u32_of = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    md.set(keys::GENERAL_ARCHITECTURE, "llama");
    md.set(keys::GENERAL_NAME, name);
    md.set(keys::GENERAL_FILE_TYPE, FILE_TYPE_ALL_F32);
    md.set(arch(keys::CONTEXT_LENGTH), u32_of(config.seq_len));
    md.set(arch(keys::EMBEDDING_LENGTH), u32_of(config.dim));
    md.set(arch(keys::FEED_FORWARD_LENGTH), u32_of(config.hidden_dim));
    md.set(arch(keys::HEAD_COUNT), u32_of(config.n_heads));
    md.set(arch(keys::HEAD_COUNT_KV), u32_of(config.n_kv_heads));
    md.set(arch(keys::BLOCK_COUNT), u32_of(config.n_layers));
    md.set(arch(keys::ROPE_DIMENSION_COUNT), u32_of(config.head_size()));
    md.set(arch(keys::ROPE_FREQ_BASE), ROPE_THETA);
    md.set(arch(keys::RMS_EPS), RMS_EPS);
    vocab.write_metadata(&mut md);
    md
}

/// Opens a llama2.c checkpoint and tokenizer as a [`ModelFile`] (format
/// [`ModelFormat::Llama2c`]) whose metadata and tensors are those of its GGUF
/// conversion.
///
/// Errors: a header with non-positive or inconsistent sizes, a file whose length is not
/// exactly what the header implies, or a tokenizer file that does not hold exactly
/// `vocab_size` tokens is an [`crate::LlmError::Llama2c`] naming the byte offset.
pub fn open(checkpoint: &Path, tokenizer: &Path) -> Result<ModelFile> {
    let bytes = map_file(checkpoint)?;
    let data = (*bytes).as_ref();
    let config = Llama2cConfig::parse(data)?;
    let tensors = config.tensor_infos(data.len() as u64)?;
    let vocab = Llama2cVocab::open(tokenizer, config.vocab_size)?;
    let name = checkpoint
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let md = metadata(&config, &vocab, &name);
    Ok(ModelFile::from_parts(
        bytes,
        ModelFormat::Llama2c,
        md,
        tensors,
    ))
}
