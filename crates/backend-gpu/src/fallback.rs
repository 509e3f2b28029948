//! Host fallback: ops without a GPU kernel read their inputs back, run the
//! [`ReferenceBackend`] kernel on the host and upload the results.
//!
//! Used for: F64 tensors (WGSL has no f64), `quantize`, copies that convert to or from
//! F64 or dequantize a block format without a shader, `linear`/`embedding` with such
//! weights (upload them with [`crate::GpuBackend::upload_weight`] to stay on the GPU),
//! the training ops (`embedding_backward`, `one_hot`, `cross_entropy` and its backward,
//! `attention_backward`) and attention with head dims over 512. Each use is counted in
//! `Backend::handoffs` (`ExecContext::handoffs`).

use std::sync::Arc;

use tempra_tensor::{ReferenceBackend, Result, Storage, Tensor};

use crate::backend::GpuBackend;

impl GpuBackend {
    /// A host copy of `t` with the same layout (read back when on a device).
    fn host_view(&self, t: &Tensor, read: bool) -> Result<Tensor> {
        if t.storage().is_host() {
            return Ok(t.clone());
        }
        let layout = *t.layout();
        let spanned = layout.bytes_spanned();
        let mut storage = Storage::owned_zeroed(spanned)?;
        let start = layout.offset() * layout.dtype().block_bytes();
        if read && spanned > start {
            t.storage()
                .read_bytes(start, &mut storage.host_bytes_mut()?[start..spanned])?;
        }
        Tensor::new(Arc::new(storage), layout)
    }

    /// Runs `run` on host copies of `inputs` and `outputs`, then writes the outputs'
    /// bytes back to the device.
    pub(crate) fn on_host(
        &self,
        op: &'static str,
        inputs: &[&Tensor],
        outputs: &mut [&mut Tensor],
        run: impl FnOnce(&ReferenceBackend, &[Tensor], &mut [Tensor]) -> Result<()>,
    ) -> Result<()> {
        self.count_fallback(op);
        let host_in: Vec<Tensor> = inputs
            .iter()
            .map(|t| self.host_view(t, true))
            .collect::<Result<_>>()?;
        // A dense output is written whole by the kernel; a strided region (concat, KV
        // writes) keeps the bytes between its elements, so those are read back first.
        let mut host_out: Vec<Tensor> = outputs
            .iter()
            .map(|t| self.host_view(t, !t.is_contiguous()))
            .collect::<Result<_>>()?;
        run(&self.reference, &host_in, &mut host_out)?;
        for (device, host) in outputs.iter_mut().zip(&host_out) {
            if device.storage().is_host() {
                // A host output (not this backend's): copy the result bytes over.
                let bytes = host.storage().host_bytes()?;
                let len = device.layout().bytes_spanned();
                let start = device.layout().offset() * device.dtype().block_bytes();
                let dst = device
                    .storage_mut()
                    .ok_or(tempra_tensor::TensorError::Argument {
                        op,
                        name: "output",
                        reason: "its storage is shared; outputs must be unique".into(),
                    })?;
                dst.host_bytes_mut()?[start..len].copy_from_slice(&bytes[start..len]);
                continue;
            }
            let layout = device.layout();
            let start = layout.offset() * layout.dtype().block_bytes();
            let end = layout.bytes_spanned();
            if end > start {
                let bytes = &host.storage().host_bytes()?[start..end];
                let storage = crate::operand::gpu_storage(device)
                    .filter(|g| g.is_on(&self.ctx))
                    .ok_or(tempra_tensor::TensorError::Device {
                        op,
                        found: device.storage().location(),
                        expected: crate::BACKEND_NAME,
                    })?;
                self.ctx
                    .write_bytes(storage.block(), start, bytes)
                    .map_err(|e| e.into_tensor_error(op))?;
            }
        }
        Ok(())
    }
}
