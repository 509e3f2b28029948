//! `GpuStorage`: the device memory behind a GPU tensor, as tempra-tensor's type-erased
//! [`DeviceStorage`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tempra_pool::Lease;
use tempra_tensor::{DeviceStorage, TensorError};

use crate::device_context::DeviceContext;
use crate::memory::{DeviceBlock, DeviceMemory};

/// Where the buffer came from.
pub(crate) enum DeviceBuffer {
    /// A lease of the device pool: back to the pool when the last tensor view drops
    /// (reused only once the GPU work that used it has completed).
    Pooled(Lease<DeviceMemory>),
    /// A buffer outside the pool (uploaded weights): freed when the last view drops.
    Owned(DeviceBlock),
}

/// A GPU buffer holding a tensor's bytes.
pub struct GpuStorage {
    buffer: DeviceBuffer,
    len: usize,
    context: Arc<DeviceContext>,
}

impl GpuStorage {
    pub(crate) fn new(buffer: DeviceBuffer, len: usize, context: Arc<DeviceContext>) -> Self {
        Self {
            buffer,
            len,
            context,
        }
    }

    /// The device block (buffer and last-use stamp).
    pub fn block(&self) -> &DeviceBlock {
        match &self.buffer {
            DeviceBuffer::Pooled(lease) => lease.block(),
            DeviceBuffer::Owned(block) => block,
        }
    }

    /// Whether the buffer is a device-pool lease (else session-lifetime memory).
    pub fn is_pooled(&self) -> bool {
        matches!(self.buffer, DeviceBuffer::Pooled(_))
    }

    /// Whether this storage belongs to the device of `context`.
    pub(crate) fn is_on(&self, context: &Arc<DeviceContext>) -> bool {
        Arc::ptr_eq(&self.context, context)
    }
}

impl DeviceStorage for GpuStorage {
    fn backend_name(&self) -> &'static str {
        crate::BACKEND_NAME
    }

    fn byte_len(&self) -> usize {
        self.len
    }

    fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<(), TensorError> {
        let end = offset.checked_add(dst.len()).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(TensorError::Argument {
                op: "read_bytes",
                name: "range",
                reason: format!("{offset}+{} exceeds {} bytes", dst.len(), self.len),
            });
        }
        self.context
            .read_back(self.block(), offset, dst)
            .map_err(|e| e.into_tensor_error("read_bytes"))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl fmt::Debug for GpuStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuStorage")
            .field("len", &self.len)
            .field("pooled", &self.is_pooled())
            .field("block", self.block())
            .finish()
    }
}
