//! `Model`: a loaded model (file mapping, config, weights, vocabulary) and the exec
//! context its sessions run on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tempra_autograd::Autograd;
use tempra_backend_cpu::CpuBackend;
use tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext, ReferenceBackend};

use crate::engine::kv_cache::KvCache;
use crate::engine::session::Session;
use crate::engine::weights::ModelWeights;
use crate::error::{LlmError, Result};
use crate::model_config::ModelConfig;
use crate::model_file::ModelFile;
use crate::tokenizer::Vocabulary;

/// Where a model's ops run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// The SIMD CPU backend.
    #[default]
    Cpu,
    /// The scalar reference backend (slow; the specification).
    Reference,
}

/// The default cap on the context length when the model's is larger.
pub const DEFAULT_MAX_CONTEXT: usize = 4096;

/// How to load a model.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The llama2.c tokenizer file, for a llama2.c checkpoint.
    pub tokenizer: Option<PathBuf>,
    /// Worker threads (default: the physical cores).
    pub threads: Option<usize>,
    /// Context length of each session (default: the model's, capped at 4096).
    pub context_length: Option<usize>,
    /// KV cache dtype: F16 (default) or F32.
    pub kv_type: DType,
    /// The backend.
    pub backend: BackendKind,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            tokenizer: None,
            threads: None,
            context_length: None,
            kv_type: DType::F16,
            backend: BackendKind::Cpu,
        }
    }
}

/// A loaded model: weights stay in the file mapping (zero-copy); sessions own their KV
/// caches.
#[derive(Debug)]
pub struct Model {
    file: ModelFile,
    config: ModelConfig,
    weights: ModelWeights,
    vocab: Vocabulary,
    autograd: Autograd,
    context_length: usize,
    kv_type: DType,
    threads: usize,
}

impl Model {
    /// Loads a GGUF file, or a llama2.c checkpoint when `options.tokenizer` names its
    /// tokenizer, and checks that the weights plus one session's KV cache fit in
    /// available memory.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Arc<Model>> {
        let file = ModelFile::load(path.as_ref(), options.tokenizer.as_deref())?;
        Model::from_file(file, options)
    }

    /// A model over an opened file.
    pub fn from_file(file: ModelFile, options: &LoadOptions) -> Result<Arc<Model>> {
        let config = ModelConfig::from_metadata(file.metadata())?;
        let vocab = Vocabulary::from_gguf(file.metadata())?;
        if vocab.len() != config.vocab_size {
            return Err(LlmError::InvalidValue {
                key: "tokenizer.ggml.tokens".into(),
                what: format!(
                    "{} tokens, but the embedding has {} rows",
                    vocab.len(),
                    config.vocab_size
                ),
            });
        }
        let context_length = options
            .context_length
            .unwrap_or(config.context_length.min(DEFAULT_MAX_CONTEXT));
        if context_length == 0 {
            return Err(LlmError::Argument {
                what: "the context length must be at least 1".into(),
            });
        }
        let kv_bytes = KvCache::reserved_bytes(
            config.block_count,
            context_length,
            config.head_count_kv,
            config.key_length,
            config.value_length,
            options.kv_type,
        );
        check_memory(file.file_size(), kv_bytes as u64)?;
        let weights = ModelWeights::from_file(&file, &config)?;
        let pool = HostPool::host();
        let (ctx, threads) = match options.backend {
            BackendKind::Cpu => {
                let backend = match options.threads {
                    Some(n) => CpuBackend::with_threads(pool, n.max(1)),
                    None => CpuBackend::new(pool),
                };
                let threads = backend.threads();
                (ExecContext::new(Arc::new(backend)), threads)
            }
            BackendKind::Reference => (ExecContext::new(Arc::new(ReferenceBackend::new(pool))), 1),
        };
        Ok(Arc::new(Model {
            file,
            config,
            weights,
            vocab,
            autograd: Autograd::new(ctx),
            context_length,
            kv_type: options.kv_type,
            threads,
        }))
    }

    /// A new session with its own KV cache of the model's context length.
    pub fn session(self: &Arc<Self>) -> Result<Session> {
        let c = &self.config;
        let cache = KvCache::new(
            c.block_count,
            self.context_length,
            c.head_count_kv,
            c.key_length,
            c.value_length,
            self.kv_type,
        )?;
        Ok(Session::new(Arc::clone(self), cache))
    }

    /// The hyperparameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The weights.
    pub fn weights(&self) -> &ModelWeights {
        &self.weights
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// The file the model came from.
    pub fn file(&self) -> &ModelFile {
        &self.file
    }

    /// The autograd handle (and through it the exec context) sessions run on.
    pub fn autograd(&self) -> &Autograd {
        &self.autograd
    }

    /// Each session's context length.
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// Worker threads the ops run on (1 on the reference backend).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The KV cache dtype.
    pub fn kv_type(&self) -> DType {
        self.kv_type
    }

    /// The bytes one session's KV cache reserves.
    pub fn kv_cache_bytes(&self) -> usize {
        let c = &self.config;
        KvCache::reserved_bytes(
            c.block_count,
            self.context_length,
            c.head_count_kv,
            c.key_length,
            c.value_length,
            self.kv_type,
        )
    }
}

/// `MemAvailable` from /proc/meminfo, in bytes (None where unknown).
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses, with the arithmetic, when weights plus KV cache exceed available memory.
fn check_memory(weights_bytes: u64, kv_bytes: u64) -> Result<()> {
    match available_memory() {
        Some(available_bytes) if weights_bytes.saturating_add(kv_bytes) > available_bytes => {
            Err(LlmError::OutOfMemory {
                weights_bytes,
                kv_bytes,
                available_bytes,
            })
        }
        _ => Ok(()),
    }
}
