//! `Session`: one conversation's state (KV cache and tokens) over a shared [`Model`].

use std::sync::Arc;

use tempra_autograd::no_grad;
use tempra_tensor::Tensor;

use crate::engine::forward::{LogitRows, forward};
use crate::engine::kv_cache::KvCache;
use crate::engine::model::Model;
use crate::error::{LlmError, Result};

/// A sequence being processed: owns its KV cache (allocated once) and the tokens it
/// holds. `prefill` runs a prompt as one batch, `step` one token; both return the logits
/// of the last position.
#[derive(Debug)]
pub struct Session {
    model: Arc<Model>,
    cache: KvCache,
    tokens: Vec<u32>,
    /// The device arena of a GPU model's session (then `cache` only counts positions).
    #[cfg(feature = "gpu")]
    gpu: Option<crate::engine::gpu::GpuSession>,
}

impl Session {
    pub(crate) fn new(model: Arc<Model>, cache: KvCache) -> Session {
        let capacity = cache.capacity();
        Session {
            model,
            cache,
            tokens: Vec::with_capacity(capacity),
            #[cfg(feature = "gpu")]
            gpu: None,
        }
    }

    /// A session of a GPU model: `cache` has no layers and counts positions; the keys and
    /// values live in `state`'s device arena.
    #[cfg(feature = "gpu")]
    pub(crate) fn with_gpu(
        model: Arc<Model>,
        cache: KvCache,
        state: crate::engine::gpu::GpuSession,
    ) -> Session {
        let mut session = Session::new(model, cache);
        session.gpu = Some(state);
        session
    }

    /// Whether the session runs on the GPU engine (its KV cache is in device memory).
    pub fn is_gpu(&self) -> bool {
        #[cfg(feature = "gpu")]
        if self.gpu.is_some() {
            return true;
        }
        false
    }

    /// Device bytes of a GPU session's arena (KV cache and step intermediates); 0 on
    /// the CPU.
    pub fn device_bytes(&self) -> usize {
        #[cfg(feature = "gpu")]
        if let Some(gpu) = &self.gpu {
            return gpu.arena().bytes();
        }
        0
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The tokens processed so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Positions held (`tokens().len()`).
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether nothing has been processed.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// The context length.
    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// The KV cache.
    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Runs `tokens` as one batch after what the session holds; returns the last
    /// position's logits `[vocab]`.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Tensor> {
        self.run(tokens, LogitRows::Last)?
            .squeeze(0)
            .map_err(LlmError::from)
    }

    /// Runs one token; returns its logits `[vocab]`.
    pub fn step(&mut self, token: u32) -> Result<Tensor> {
        self.prefill(&[token])
    }

    /// Runs `tokens` and returns the logits of every one of them `[T, vocab]`.
    pub fn logits_all(&mut self, tokens: &[u32]) -> Result<Tensor> {
        self.run(tokens, LogitRows::All)
    }

    fn run(&mut self, tokens: &[u32], rows: LogitRows) -> Result<Tensor> {
        if self.cache.len() + tokens.len() > self.cache.capacity() {
            return Err(LlmError::ContextFull {
                needed: self.cache.len() + tokens.len(),
                capacity: self.cache.capacity(),
            });
        }
        #[cfg(feature = "gpu")]
        if let (Some(gpu), Some(engine)) = (&self.gpu, self.model.gpu_engine()) {
            let start = self.cache.len();
            let logits = gpu.run(engine, self.model.config(), tokens, start, rows)?;
            self.cache.advance(tokens.len());
            self.tokens.extend_from_slice(tokens);
            return Ok(logits);
        }
        let _guard = no_grad();
        let model = &*self.model;
        let logits = forward(
            model.autograd(),
            model.config(),
            model.forward_weights(),
            tokens,
            Some(&mut self.cache),
            rows,
        )?;
        self.tokens.extend_from_slice(tokens);
        Ok(logits.into_tensor())
    }

    /// The cache and token list, for the batched decode (which advances both).
    pub(crate) fn state_mut(&mut self) -> (&mut KvCache, &mut Vec<u32>) {
        (&mut self.cache, &mut self.tokens)
    }

    /// Keeps the first `n` positions.
    pub fn truncate(&mut self, n: usize) {
        self.cache.truncate(n);
        self.tokens.truncate(self.cache.len());
    }

    /// Forgets everything (no memory is touched or freed).
    pub fn reset(&mut self) {
        self.cache.reset();
        self.tokens.clear();
    }
}

/// The f32 values of a contiguous logits row (e.g. from [`Session::step`]).
pub fn logits_slice(logits: &Tensor) -> Result<&[f32]> {
    let range = logits
        .layout()
        .contiguous_range()
        .ok_or_else(|| LlmError::Argument {
            what: "logits must be contiguous".into(),
        })?;
    Ok(&logits.host_slice::<f32>()?[range])
}
