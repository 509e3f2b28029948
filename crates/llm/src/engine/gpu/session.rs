//! `GpuSession`: a session's device state, one [`BufferArena`] holding its KV cache and
//! every intermediate of a step, allocated when the session is made.

use std::sync::atomic::{AtomicUsize, Ordering};

use tempra_backend_gpu::BufferArena;
use tempra_tensor::Tensor;

use crate::engine::forward::LogitRows;
use crate::engine::gpu::engine::GpuEngine;
use crate::engine::gpu::forward::forward_chunk;
use crate::engine::session::logits_slice;
use crate::error::{LlmError, Result};
use crate::model_config::ModelConfig;

/// Numbers arenas in their labels.
static NEXT_SESSION: AtomicUsize = AtomicUsize::new(0);

/// A session's arena. Positions are counted by the owning [`crate::engine::Session`].
#[derive(Debug)]
pub(crate) struct GpuSession {
    arena: BufferArena,
}

impl GpuSession {
    /// Allocates the arena of a session of `context_length` positions.
    pub(crate) fn new(engine: &GpuEngine, context_length: usize) -> Result<GpuSession> {
        let n = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        let arena = BufferArena::new(
            engine.backend(),
            format!("gpu session {n}"),
            engine.arena_shape(),
            GpuEngine::arena_capacity(context_length),
        )?;
        Ok(GpuSession { arena })
    }

    /// The arena.
    pub(crate) fn arena(&self) -> &BufferArena {
        &self.arena
    }

    /// Runs `tokens` at positions `start..` in steps of at most `max_batch_tokens` (of
    /// `max_logit_rows` when every row's logits are wanted) and returns the logits of
    /// `rows` on the host: `[1, V]` or `[T, V]`.
    pub(crate) fn run(
        &self,
        engine: &GpuEngine,
        config: &ModelConfig,
        tokens: &[u32],
        start: usize,
        rows: LogitRows,
    ) -> Result<Tensor> {
        let cap = self.arena.capacity();
        let step = match rows {
            LogitRows::Last => cap.max_batch_tokens,
            LogitRows::All => cap.max_logit_rows,
        };
        let chunks = tokens.len().div_ceil(step);
        if chunks == 0 {
            return Err(LlmError::Argument {
                what: "forward needs at least one token".into(),
            });
        }
        let mut all: Vec<f32> = Vec::new();
        let mut last = None;
        for (i, chunk) in tokens.chunks(step).enumerate() {
            let want = match rows {
                LogitRows::All => Some(LogitRows::All),
                LogitRows::Last if i + 1 == chunks => Some(LogitRows::Last),
                LogitRows::Last => None,
            };
            let logits = forward_chunk(engine, config, &self.arena, chunk, start + i * step, want)?;
            if rows == LogitRows::All && chunks > 1 {
                if let Some(l) = &logits {
                    all.extend_from_slice(logits_slice(l)?);
                }
            } else {
                last = logits;
            }
        }
        match last {
            Some(logits) => Ok(logits),
            None => Ok(Tensor::owned_from_slice(
                &all,
                &[tokens.len(), config.vocab_size],
            )?),
        }
    }
}
