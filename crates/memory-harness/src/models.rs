//! The models the scenarios run: tiny random-weight GGUFs written once to a scratch
//! directory, and the real stories260K llama2.c checkpoint from the shared directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tempra_llm::ModelFile;
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, shared_dir, write_random_model};

/// A model file on disk and how to open it.
#[derive(Clone, Debug)]
pub struct ModelSource {
    /// The short name used in check names (`tiny-q8_0`, `stories260k`).
    pub name: &'static str,
    /// The GGUF file or llama2.c checkpoint.
    pub path: PathBuf,
    /// The llama2.c tokenizer, for a checkpoint.
    pub tokenizer: Option<PathBuf>,
}

impl ModelSource {
    /// Memory-maps the file.
    pub fn open(&self) -> Result<ModelFile> {
        ModelFile::load(&self.path, self.tokenizer.as_deref())
            .with_context(|| format!("opening {}", self.path.display()))
    }
}

/// A scratch directory removed on drop.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// A fresh directory under the system temporary directory, named after this process.
    pub fn new() -> Result<Self> {
        let path =
            std::env::temp_dir().join(format!("tempra-memory-harness-{}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!(
                "memory-harness: could not remove {}: {e}",
                self.path.display()
            );
        }
    }
}

/// The tiny shape the decode, teardown and repeated-session scenarios use
/// ([`ModelShape::TINY`]: 2 layers, width 256, GQA 2, ~1.4M parameters).
pub const DECODE_SHAPE: ModelShape = ModelShape::TINY;

/// The transformer the training scenario trains: 2 layers, width 64, GQA 2.
pub const TRAIN_SHAPE: ModelShape = ModelShape {
    dim: 64,
    layers: 2,
    heads: 4,
    kv_heads: 2,
    ffn: 128,
    vocab: 300,
    context: 64,
    tied: false,
    ..ModelShape::TINY
};

/// Writes a random-weight llama GGUF of `shape` with `qtype` weights into `dir`.
pub fn random_model(
    dir: &ScratchDir,
    name: &'static str,
    shape: ModelShape,
    qtype: QuantType,
) -> Result<ModelSource> {
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(qtype)
        .with_seed(11);
    let path = dir.path().join(format!("{name}.gguf"));
    let file =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    write_random_model(&spec, std::io::BufWriter::new(file))?
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_all()?;
    Ok(ModelSource {
        name,
        path,
        tokenizer: None,
    })
}

/// The shared stories260K checkpoint, or `None` when the shared directory lacks it.
pub fn stories260k() -> Option<ModelSource> {
    let dir = shared_dir()?.join("models/stories260K");
    let (path, tokenizer) = (dir.join("stories260K.bin"), dir.join("tok512.bin"));
    (path.is_file() && tokenizer.is_file()).then_some(ModelSource {
        name: "stories260k",
        path,
        tokenizer: Some(tokenizer),
    })
}
