//! `GpuEngine`: the GPU backend and the model's weights uploaded to it, shared by every
//! GPU session of a [`crate::engine::Model`].

use tempra_backend_gpu::{ArenaCapacity, ArenaShape, GpuBackend};
use tempra_tensor::DType;

use crate::engine::gpu::weights::GpuWeights;
use crate::engine::weights::ModelWeights;
use crate::error::Result;
use crate::model_config::ModelConfig;

/// Tokens one GPU step processes at most; longer prompts run in chunks of this many.
pub(crate) const MAX_BATCH_TOKENS: usize = 256;
/// Rows of logits one GPU step computes at most; scoring every position of a longer
/// sequence runs in chunks of this many.
pub(crate) const MAX_LOGIT_ROWS: usize = 32;

/// A device and the weights on it.
#[derive(Debug)]
pub(crate) struct GpuEngine {
    gpu: GpuBackend,
    weights: GpuWeights,
    shape: ArenaShape,
}

impl GpuEngine {
    /// Opens the GPU ([`GpuBackend::new`]: `TEMPRA_GPU_ADAPTER` picks by name) and
    /// uploads `weights`.
    ///
    /// Errors: no adapter ([`tempra_backend_gpu::GpuError::NoAdapter`], as
    /// [`crate::LlmError::Gpu`]), or the upload failing.
    pub(crate) fn new(
        config: &ModelConfig,
        weights: &ModelWeights,
        kv_type: DType,
    ) -> Result<GpuEngine> {
        let gpu = GpuBackend::new()?;
        let weights = GpuWeights::upload(&gpu, weights)?;
        // Make sure the upload completed (and report device errors now, not mid-step).
        gpu.synchronize()?;
        let shape = ArenaShape {
            hidden: config.embedding_length,
            heads: config.head_count,
            kv_heads: config.head_count_kv,
            key_dim: config.key_length,
            value_dim: config.value_length,
            ffn: config.feed_forward_length,
            vocab: config.vocab_size,
            layers: config.block_count,
            kv_dtype: kv_type,
        };
        Ok(GpuEngine {
            gpu,
            weights,
            shape,
        })
    }

    /// The backend.
    pub(crate) fn backend(&self) -> &GpuBackend {
        &self.gpu
    }

    /// The weights on the device.
    pub(crate) fn weights(&self) -> &GpuWeights {
        &self.weights
    }

    /// The arena shape of this model's sessions.
    pub(crate) fn arena_shape(&self) -> &ArenaShape {
        &self.shape
    }

    /// The arena capacity of a session of `context_length` positions.
    pub(crate) fn arena_capacity(context_length: usize) -> ArenaCapacity {
        let max_batch_tokens = MAX_BATCH_TOKENS.min(context_length).max(1);
        ArenaCapacity {
            max_batch_tokens,
            max_logit_rows: MAX_LOGIT_ROWS.min(max_batch_tokens),
            max_seq_len: context_length,
        }
    }
}
