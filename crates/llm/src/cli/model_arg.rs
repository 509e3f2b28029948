//! `ModelArgs`: the `-m MODEL [--tokenizer FILE]` pair every model command takes.

use std::path::PathBuf;

use anyhow::Context;
use tempra_llm::{LlmError, ModelFile};

/// Which model file to open.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ModelArgs {
    /// Model file: GGUF, or a llama2.c checkpoint together with --tokenizer.
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub(crate) model: PathBuf,
    /// llama2.c tokenizer file (tokenizer.bin), for a llama2.c checkpoint.
    #[arg(long, value_name = "FILE")]
    pub(crate) tokenizer: Option<PathBuf>,
}

impl ModelArgs {
    /// Opens the model; errors name the file once.
    pub(crate) fn open(&self) -> anyhow::Result<ModelFile> {
        ModelFile::load(&self.model, self.tokenizer.as_deref()).or_else(|e| match e {
            // I/O errors already carry the path.
            LlmError::Io { .. } => Err(e.into()),
            other => Err(other).with_context(|| self.model.display().to_string()),
        })
    }
}
