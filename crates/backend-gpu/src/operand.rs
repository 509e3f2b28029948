//! Operands: a tensor resolved to the device buffer a kernel binds.
//!
//! A tensor in this device's memory is bound where it lies. A host tensor (or one on
//! another device) is copied into a pooled scratch buffer first: the only case where a
//! kernel call takes memory it was not handed, a pool lease that returns when the call
//! ends (and is reused only after the GPU finished with it).

use std::sync::Arc;

use tempra_pool::Lease;
use tempra_tensor::{Layout, Storage, Tensor, TensorError};

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::memory::{DeviceBlock, DeviceMemory};
use crate::storage::GpuStorage;
use crate::window::BufferWindow;

enum Source<'t> {
    Device(&'t DeviceBlock),
    Scratch(Lease<DeviceMemory>),
}

/// A tensor's buffer and its layout (offset relative to that buffer).
pub(crate) struct Operand<'t> {
    source: Source<'t>,
    pub(crate) layout: Layout,
}

impl Operand<'_> {
    /// The device block.
    pub(crate) fn block(&self) -> &DeviceBlock {
        match &self.source {
            Source::Device(b) => b,
            Source::Scratch(lease) => lease.block(),
        }
    }

    /// Bytes of the buffer the layout addresses: from its first unit to past its last.
    pub(crate) fn byte_range(&self) -> (u64, u64) {
        let bb = self.layout.dtype().block_bytes() as u64;
        let start = self.layout.offset() as u64 * bb;
        let end = (self.layout.units_spanned() as u64 * bb).max(start);
        (start, end)
    }

    /// One window binding the whole operand, and the operand's first unit relative to
    /// the window (in units of its dtype; for block dtypes in bytes).
    pub(crate) fn bind(
        &self,
        ctx: &DeviceContext,
        op: &'static str,
        what: &'static str,
    ) -> Result<(BufferWindow<'_>, u32)> {
        let (start, end) = self.byte_range();
        let (window, rel) = ctx.rules.window(op, what, self.block(), start, end)?;
        let dtype = self.layout.dtype();
        let rel = if dtype.is_quantized() {
            rel
        } else {
            rel / dtype.block_bytes() as u64
        };
        let rel = u32::try_from(rel).map_err(|_| GpuError::TooLarge {
            op,
            what,
            bytes: rel,
            limit: u32::MAX as u64,
        })?;
        Ok((window, rel))
    }
}

/// The `GpuStorage` of a tensor, when it is one.
pub(crate) fn gpu_storage(t: &Tensor) -> Option<&GpuStorage> {
    match t.storage() {
        Storage::Device(d) => d.as_any().downcast_ref::<GpuStorage>(),
        _ => None,
    }
}

impl DeviceContext {
    /// Resolves an input tensor: in place when it lives on this device, else copied into
    /// a scratch lease (only the bytes its layout addresses).
    pub(crate) fn operand<'t>(self: &Arc<Self>, t: &'t Tensor) -> Result<Operand<'t>> {
        if let Some(g) = gpu_storage(t).filter(|g| g.is_on(self)) {
            return Ok(Operand {
                source: Source::Device(g.block()),
                layout: *t.layout(),
            });
        }
        let layout = t.layout();
        let bb = layout.dtype().block_bytes();
        let start = layout.offset() * bb;
        let end = (layout.units_spanned() * bb).max(start);
        let mut bytes = vec![0u8; end - start];
        t.storage().read_bytes(start, &mut bytes)?;
        let lease = self
            .pool
            .acquire(bytes.len().max(4))
            .map_err(|source| TensorError::Pool {
                op: "upload",
                source,
            })?;
        self.write_bytes(lease.block(), 0, &bytes)?;
        let rebased = Layout::from_parts(*layout.shape(), layout.strides(), 0, layout.dtype())?;
        Ok(Operand {
            source: Source::Scratch(lease),
            layout: rebased,
        })
    }

    /// Resolves an output tensor, which must live on this device.
    pub(crate) fn output<'t>(
        self: &Arc<Self>,
        op: &'static str,
        t: &'t Tensor,
    ) -> Result<Operand<'t>> {
        match gpu_storage(t).filter(|g| g.is_on(self)) {
            Some(g) => Ok(Operand {
                source: Source::Device(g.block()),
                layout: *t.layout(),
            }),
            None => Err(GpuError::Tensor(TensorError::Device {
                op,
                found: t.storage().location(),
                expected: crate::BACKEND_NAME,
            })),
        }
    }
}
