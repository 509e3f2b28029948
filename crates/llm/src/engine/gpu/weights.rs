//! `GpuWeights`: a model's weights uploaded once to device memory.
//!
//! Matrices (projections, FFN, embedding, output head) keep their dtype where the GPU
//! kernels read it: F32, F16, BF16, and the block formats Q4_0, Q8_0, Q4_K, Q5_K and
//! Q6_K stay quantized on the device and are dequantized inside the `linear` and
//! `embedding` shaders. Other block formats (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, ...) are
//! dequantized to F16 at upload, with a line on stderr saying so. Vectors (norm weights,
//! biases, rope frequency factors) are uploaded as F32.

use tempra_autograd::Var;
use tempra_backend_gpu::GpuBackend;
use tempra_tensor::{DType, ExecContext, Tensor};

use crate::engine::weights::ModelWeights;
use crate::error::Result;

/// One block's weights on the device (see [`crate::engine::LayerWeights`]).
#[derive(Debug)]
pub(crate) struct GpuLayerWeights {
    pub(crate) attn_norm: Tensor,
    pub(crate) wq: Tensor,
    pub(crate) wk: Tensor,
    pub(crate) wv: Tensor,
    pub(crate) wo: Tensor,
    pub(crate) bq: Option<Tensor>,
    pub(crate) bk: Option<Tensor>,
    pub(crate) bv: Option<Tensor>,
    pub(crate) q_norm: Option<Tensor>,
    pub(crate) k_norm: Option<Tensor>,
    pub(crate) post_attn_norm: Option<Tensor>,
    pub(crate) ffn_norm: Tensor,
    pub(crate) gate: Tensor,
    pub(crate) up: Tensor,
    pub(crate) down: Tensor,
    pub(crate) post_ffn_norm: Option<Tensor>,
}

/// All weights on the device.
#[derive(Debug)]
pub(crate) struct GpuWeights {
    pub(crate) token_embd: Tensor,
    pub(crate) output_norm: Tensor,
    /// `None` when tied to the token embedding.
    pub(crate) output: Option<Tensor>,
    pub(crate) rope_freqs: Option<Tensor>,
    pub(crate) layers: Vec<GpuLayerWeights>,
}

/// Uploads weights one tensor at a time.
struct Uploader<'a> {
    gpu: &'a GpuBackend,
    host: ExecContext,
}

impl Uploader<'_> {
    /// A matrix, in its own dtype where the kernels read it (else F16).
    fn matrix(&mut self, v: &Var) -> Result<Tensor> {
        Ok(self.gpu.upload_weight(v.tensor())?)
    }

    /// A vector, as F32.
    fn vector(&mut self, t: &Tensor) -> Result<Tensor> {
        let t = if t.dtype() == DType::F32 {
            t.clone()
        } else {
            self.host.cast(t, DType::F32)?
        };
        Ok(self.gpu.upload(&t)?)
    }

    fn opt_vector(&mut self, v: &Option<Var>) -> Result<Option<Tensor>> {
        v.as_ref().map(|v| self.vector(v.tensor())).transpose()
    }
}

impl GpuWeights {
    /// Uploads `weights` to `gpu`'s device (session-lifetime buffers outside its pool).
    pub(crate) fn upload(gpu: &GpuBackend, weights: &ModelWeights) -> Result<GpuWeights> {
        let mut up = Uploader {
            gpu,
            host: ExecContext::reference(),
        };
        let mut layers = Vec::with_capacity(weights.layers.len());
        for l in &weights.layers {
            layers.push(GpuLayerWeights {
                attn_norm: up.vector(l.attn_norm.tensor())?,
                wq: up.matrix(&l.wq)?,
                wk: up.matrix(&l.wk)?,
                wv: up.matrix(&l.wv)?,
                wo: up.matrix(&l.wo)?,
                bq: up.opt_vector(&l.bq)?,
                bk: up.opt_vector(&l.bk)?,
                bv: up.opt_vector(&l.bv)?,
                q_norm: up.opt_vector(&l.q_norm)?,
                k_norm: up.opt_vector(&l.k_norm)?,
                post_attn_norm: up.opt_vector(&l.post_attn_norm)?,
                ffn_norm: up.vector(l.ffn_norm.tensor())?,
                gate: up.matrix(&l.gate)?,
                up: up.matrix(&l.up)?,
                down: up.matrix(&l.down)?,
                post_ffn_norm: up.opt_vector(&l.post_ffn_norm)?,
            });
        }
        let token_embd = up.matrix(&weights.token_embd)?;
        let output_norm = up.vector(weights.output_norm.tensor())?;
        let output = weights.output.as_ref().map(|o| up.matrix(o)).transpose()?;
        let rope_freqs = weights
            .rope_freqs
            .as_ref()
            .map(|f| up.vector(f))
            .transpose()?;
        Ok(GpuWeights {
            token_embd,
            output_norm,
            output,
            rope_freqs,
            layers,
        })
    }

    /// The output head (the token embedding when tied).
    pub(crate) fn head(&self) -> &Tensor {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }
}
