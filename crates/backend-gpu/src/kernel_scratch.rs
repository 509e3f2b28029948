//! `KernelScratch`: one device buffer that a kernel reuses on every call, for scratch the
//! GPU both writes and reads within the call's own dispatches.
//!
//! A pooled lease per call is handed out again only once the GPU has finished the call
//! before, so how many buffers a step made would depend on how far the GPU lags behind
//! the host. Reusing one buffer needs no such wait: the queue runs dispatches in the
//! order they were recorded, and wgpu orders a dispatch that reads the buffer after the
//! one before it that wrote it. The buffer grows (to a power of two) when a call needs
//! more, and the lock is held for the whole call, so two calls recorded from two
//! threads never interleave their uses of it.

use std::sync::Mutex;

use crate::error::{GpuError, Result};
use crate::memory::{DeviceBlock, DeviceMemory};

/// A grow-only device buffer shared by every call of one kernel.
#[derive(Default)]
pub(crate) struct KernelScratch {
    block: Mutex<Option<DeviceBlock>>,
}

impl KernelScratch {
    /// Runs `record` with a buffer of at least `bytes`, made from `memory` only when the
    /// one kept is smaller; the buffer stays locked to this call while `record` runs.
    pub(crate) fn with<R>(
        &self,
        op: &'static str,
        memory: &DeviceMemory,
        bytes: usize,
        record: impl FnOnce(&DeviceBlock) -> Result<R>,
    ) -> Result<R> {
        let mut kept = self.block.lock().unwrap_or_else(|p| p.into_inner());
        if kept.as_ref().is_some_and(|block| block.size() < bytes) {
            // wgpu keeps the old buffer alive until the work that uses it completes.
            *kept = None;
        }
        let block = match &mut *kept {
            Some(block) => block,
            empty => empty.insert(memory.make(bytes.max(4).next_power_of_two()).map_err(|e| {
                GpuError::Device {
                    op,
                    message: e.to_string(),
                }
            })?),
        };
        record(block)
    }

    /// Frees the buffer (it goes once no call in flight uses it).
    pub(crate) fn clear(&self) {
        *self.block.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}
