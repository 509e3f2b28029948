//! A model's weights uploaded once to GPU memory, in the dtypes the GPU kernels read
//! (cargo feature `gpu`): the one GPU-specific step of loading.
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

/// `weights` on `gpu`'s device (buffers outside its pool, freed with the last view).
pub(crate) fn upload(gpu: &GpuBackend, weights: &ModelWeights) -> Result<ModelWeights> {
    let host = ExecContext::reference();
    let vector = |t: &Tensor| -> Result<Tensor> {
        let t = if t.dtype() == DType::F32 {
            t.clone()
        } else {
            host.cast(t, DType::F32)?
        };
        Ok(gpu.upload(&t)?)
    };
    let mut uploaded = weights.map(|v| {
        let t = v.tensor();
        let on_device = if t.rank() >= 2 {
            gpu.upload_weight(t)?
        } else {
            vector(t)?
        };
        Ok(Var::constant(on_device))
    })?;
    uploaded.rope_freqs = weights.rope_freqs.as_ref().map(vector).transpose()?;
    // Make sure the upload completed (and report device errors now, not mid-step).
    gpu.synchronize()?;
    Ok(uploaded)
}
