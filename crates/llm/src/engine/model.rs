//! `Model`: a loaded model (file mapping, config, weights, vocabulary) and the executor
//! its sessions run on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tempra_autograd::Autograd;
use tempra_tensor::DType;

use crate::engine::executor::Executor;
use crate::engine::kv_cache::{KvCache, KvTypes};
use crate::engine::session::Session;
use crate::engine::step_arena::{ArenaCapacity, StepArena};
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
    /// tempra-backend-gpu (wgpu): weights uploaded once, KV caches and the step arena in
    /// device memory, the same forward as the CPU. Needs the `gpu` cargo feature and an
    /// adapter (`TEMPRA_GPU_ADAPTER=name` picks one).
    Gpu,
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
    /// KV cache dtype of keys and values (see [`KvTypes`]): F16 (default), F32, or a
    /// block format (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1). An encoder's cache is always F32.
    pub kv_type: DType,
    /// The keys' dtype where it differs from `kv_type`.
    pub kv_type_k: Option<DType>,
    /// The values' dtype where it differs from `kv_type`.
    pub kv_type_v: Option<DType>,
    /// The backend.
    pub backend: BackendKind,
    /// Let the backend copy the matrices into the layout its `linear` reads fastest
    /// (see [`ModelWeights::prepare_for_linear`]; on the CPU Q4_0, Q8_0 and K-quant Q4_K,
    /// Q5_K, Q6_K rows interleaved by eight, which the decode GEMV reads as one stream,
    /// and F32, F16, BF16 matrices copied as they are onto huge pages).
    /// Default true; the copy replaces those weights' file pages in memory.
    pub prepare_weights: bool,
    /// The step arena's rows (default: [`ArenaCapacity::for_context`]): longer prompts
    /// run in chunks of `max_batch_tokens`.
    pub arena: Option<ArenaCapacity>,
    /// The most sessions one batched decode step runs (`tempra serve`'s slots): the
    /// arena's rows cover at least this many, up to 512 (default 1).
    pub batch_sessions: usize,
    /// Let prefill take the CPU backend's faster arithmetic that depends on how many
    /// rows share a call ([`tempra_backend_cpu::CpuConfig::fast_prefill`]): a prompt run
    /// as one batch then gives logits that differ in the last bits from the same tokens
    /// decoded one at a time or partly served from the cache. Default false: the same
    /// request gives the same tokens.
    pub fast_prefill: bool,
}

impl LoadOptions {
    /// The KV cache's dtypes these options ask for.
    pub fn kv_types(&self) -> KvTypes {
        KvTypes {
            keys: self.kv_type_k.unwrap_or(self.kv_type),
            values: self.kv_type_v.unwrap_or(self.kv_type),
        }
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            tokenizer: None,
            threads: None,
            context_length: None,
            kv_type: DType::F16,
            kv_type_k: None,
            kv_type_v: None,
            backend: BackendKind::Cpu,
            prepare_weights: true,
            arena: None,
            batch_sessions: 1,
            fast_prefill: false,
        }
    }
}

/// A loaded model: weights stay in the file mapping (zero-copy) or in the backend's
/// layout; one executor (backend and step arena) runs every session; sessions own
/// their KV caches.
#[derive(Debug)]
pub struct Model {
    file: ModelFile,
    config: ModelConfig,
    weights: ModelWeights,
    /// `weights` with the backend's prepared matrices, when it prepared any.
    prepared: Option<ModelWeights>,
    vocab: Vocabulary,
    executor: Executor,
    context_length: usize,
    kv_types: KvTypes,
}

impl Model {
    /// Loads a GGUF file, or a llama2.c checkpoint when `options.tokenizer` names its
    /// tokenizer, and checks that the weights plus one session's KV cache fit in
    /// available memory.
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Arc<Model>> {
        let file = ModelFile::load(path.as_ref(), options.tokenizer.as_deref())?;
        Model::from_file(file, options)
    }

    /// Loads a GGUF embedded in the binary (e.g. the demo model, see
    /// [`crate::demo::embedded_demo_model`]); its tensors are static-bytes storage (see
    /// [`ModelFile::from_static_gguf`]). `options.tokenizer` must be `None`.
    pub fn load_static(bytes: &'static [u8], options: &LoadOptions) -> Result<Arc<Model>> {
        if options.tokenizer.is_some() {
            return Err(LlmError::Argument {
                what: "an embedded GGUF carries its own tokenizer; no tokenizer file applies"
                    .into(),
            });
        }
        let file = ModelFile::from_static_gguf(bytes, &crate::gguf::Limits::default())?;
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
        let encoder = config.arch.description().encoder;
        if encoder && context_length > config.context_length {
            return Err(LlmError::Argument {
                what: format!(
                    "{} learned {} positions: a context of {context_length} does not fit",
                    config.arch, config.context_length
                ),
            });
        }
        // An encoder's keys and values live for one step: rounding them would only cost
        // accuracy, so its cache is f32 whatever the options say.
        let kv_types = if encoder {
            KvTypes::same(DType::F32)
        } else {
            options.kv_types()
        };
        kv_types.check(config.key_length, config.value_length)?;
        let kv_bytes = KvCache::reserved_bytes(
            config.block_count,
            context_length,
            config.head_count_kv,
            config.key_length,
            config.value_length,
            kv_types,
        );
        let mut capacity = options
            .arena
            .unwrap_or_else(|| ArenaCapacity::for_context(context_length));
        // Batches beyond the default step size take their outputs from the pool (counted)
        // rather than sizing the arena for them.
        let sessions = options
            .batch_sessions
            .min(ArenaCapacity::DEFAULT_BATCH_TOKENS);
        capacity.max_batch_tokens = capacity.max_batch_tokens.max(sessions);
        // An encoder's input runs in one step (every token attends to every other).
        if encoder {
            capacity.max_batch_tokens = capacity.max_batch_tokens.max(context_length);
        }
        capacity.max_logit_rows = capacity.max_logit_rows.max(sessions);
        let arena_bytes = StepArena::bytes_for(&config, &capacity);
        check_memory(file.file_size(), kv_bytes as u64, arena_bytes as u64)?;
        let mut weights = ModelWeights::from_file(&file, &config)?;
        weights.select_rope_factors(context_length, &config);
        let executor = Executor::open(options, &config, capacity)?;
        if executor.kind() == BackendKind::Gpu
            && (kv_types.keys.is_quantized() || kv_types.values.is_quantized())
        {
            eprintln!(
                "tempra: no GPU shader reads a {kv_types} KV cache; its writes and attention run \
                 on the host (counted hand-offs)"
            );
        }
        let prepared = executor.prepare_weights(&weights, &file, options.prepare_weights)?;
        Ok(Arc::new(Model {
            file,
            config,
            weights,
            prepared,
            vocab,
            executor,
            context_length,
            kv_types,
        }))
    }

    /// A new session with its own KV cache of the model's context length, allocated
    /// through the backend (device memory on the GPU).
    pub fn session(self: &Arc<Self>) -> Result<Session> {
        let c = &self.config;
        let cache = KvCache::new(
            self.executor.ctx(),
            c.block_count,
            self.context_length,
            c.head_count_kv,
            c.key_length,
            c.value_length,
            self.kv_types,
        )?;
        Ok(Session::new(Arc::clone(self), cache))
    }

    /// Where the model's ops run: the backend and the step arena.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The backend the model runs on.
    pub fn backend_kind(&self) -> BackendKind {
        self.executor.kind()
    }

    /// The GPU adapter a [`BackendKind::Gpu`] model runs on (name, API, type, driver);
    /// `None` on the CPU backends.
    pub fn gpu_adapter(&self) -> Option<String> {
        self.executor.gpu_adapter()
    }

    /// The hyperparameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The weights as the file holds them.
    pub fn weights(&self) -> &ModelWeights {
        &self.weights
    }

    /// The weights the forward pass reads: [`weights`](Self::weights) with the
    /// matrices the backend prepared for `linear` (see
    /// [`LoadOptions::prepare_weights`]). Only `linear` accepts the prepared ones.
    pub fn forward_weights(&self) -> &ModelWeights {
        self.prepared.as_ref().unwrap_or(&self.weights)
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
        self.executor.autograd()
    }

    /// Each session's context length.
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// Worker threads the ops run on (1 on the reference backend).
    pub fn threads(&self) -> usize {
        self.executor.threads()
    }

    /// The KV cache's dtypes.
    pub fn kv_types(&self) -> KvTypes {
        self.kv_types
    }

    /// The bytes the executor's step arena holds.
    pub fn arena_bytes(&self) -> usize {
        self.executor.arena_bytes()
    }

    /// The bytes one session's KV cache reserves (what the load's and the server's
    /// memory checks count).
    pub fn kv_cache_bytes(&self) -> usize {
        self.kv_bytes_per_position()
            .saturating_mul(self.context_length)
    }

    /// The KV cache bytes of one position, every layer.
    pub fn kv_bytes_per_position(&self) -> usize {
        let c = &self.config;
        KvCache::reserved_bytes(
            c.block_count,
            1,
            c.head_count_kv,
            c.key_length,
            c.value_length,
            self.kv_types,
        )
    }
}

/// `MemAvailable` from /proc/meminfo, in bytes (None where unknown).
pub(crate) fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses, with the arithmetic, when weights plus KV cache plus the step arena exceed
/// available memory.
fn check_memory(weights_bytes: u64, kv_bytes: u64, arena_bytes: u64) -> Result<()> {
    let needed = weights_bytes
        .saturating_add(kv_bytes)
        .saturating_add(arena_bytes);
    match available_memory() {
        Some(available_bytes) if needed > available_bytes => Err(LlmError::OutOfMemory {
            weights_bytes,
            kv_bytes,
            arena_bytes,
            available_bytes,
        }),
        _ => Ok(()),
    }
}
