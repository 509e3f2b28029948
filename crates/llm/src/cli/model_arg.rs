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

/// The `-m` value naming the demo model embedded in the binary (`tempra run`'s default).
pub(crate) const EMBEDDED_MODEL: &str = "@demo";

impl ModelArgs {
    /// Whether `-m` names the embedded demo model.
    pub(crate) fn is_embedded(&self) -> bool {
        self.model.as_os_str() == EMBEDDED_MODEL
    }

    /// Opens the model; errors name the file once.
    pub(crate) fn open(&self) -> anyhow::Result<ModelFile> {
        if self.is_embedded() {
            if self.tokenizer.is_some() {
                anyhow::bail!(
                    "the embedded demo model carries its own tokenizer; drop --tokenizer"
                );
            }
            let bytes = tempra_llm::demo::embedded_demo_model().context(
                "this build has no embedded demo model (crates/llm/assets/demo-stories.gguf, made by `cargo xtask train-demo`): pass a model with -m",
            )?;
            return ModelFile::from_static_gguf(bytes, &tempra_llm::gguf::Limits::default())
                .context(EMBEDDED_MODEL);
        }
        ModelFile::load(&self.model, self.tokenizer.as_deref()).or_else(|e| match e {
            // I/O errors already carry the path.
            LlmError::Io { .. } => Err(e.into()),
            other => Err(other).with_context(|| self.model.display().to_string()),
        })
    }
}
