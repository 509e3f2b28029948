//! `DeviceMemory`: the [`Memory`] the device pool recycles, making wgpu buffers.
//!
//! Each [`DeviceBlock`] carries the index of the last submission that used it. The pool
//! asks [`Memory::is_ready`] before handing a cached block out again, so a buffer returns
//! to use only after the GPU work that read or wrote it has completed, never while a
//! queued or recorded command may still touch it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tempra_pool::{Memory, PoolError};

use crate::block_on::block_on;
use crate::submission::SubmissionTracker;

/// One wgpu buffer plus its last use.
pub struct DeviceBlock {
    buffer: wgpu::Buffer,
    size: usize,
    last_use: AtomicU64,
    live: Arc<AtomicUsize>,
}

impl DeviceBlock {
    /// The wgpu buffer.
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// The buffer's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The index of the last submission that used the buffer (0: never used).
    pub fn last_use(&self) -> u64 {
        self.last_use.load(Ordering::Acquire)
    }

    /// Marks the buffer as never ready again (it may be in an unknown state after a
    /// device error): the pool keeps it out of use and frees it on the next trim.
    pub(crate) fn retire(&self) {
        self.stamp(u64::MAX);
    }

    /// Records that submission `index` uses the buffer.
    pub(crate) fn stamp(&self, index: u64) {
        self.last_use.fetch_max(index, Ordering::AcqRel);
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        // wgpu keeps the buffer alive internally until queued work using it completes.
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl fmt::Debug for DeviceBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBlock")
            .field("size", &self.size)
            .field("last_use", &self.last_use())
            .finish()
    }
}

/// Makes wgpu buffers of one usage for a [`tempra_pool::BufferPool`].
pub struct DeviceMemory {
    device: wgpu::Device,
    usage: wgpu::BufferUsages,
    label: &'static str,
    max_buffer_size: u64,
    tracker: Arc<SubmissionTracker>,
    live: Arc<AtomicUsize>,
}

impl DeviceMemory {
    pub(crate) fn new(
        device: wgpu::Device,
        usage: wgpu::BufferUsages,
        label: &'static str,
        tracker: Arc<SubmissionTracker>,
        live: Arc<AtomicUsize>,
    ) -> Self {
        let max_buffer_size = device.limits().max_buffer_size;
        Self {
            device,
            usage,
            label,
            max_buffer_size,
            tracker,
            live,
        }
    }

    /// Makes a block of `bytes` (rounded up to 4) outside any pool: session-lifetime
    /// buffers (uploaded weights) and scratch.
    pub(crate) fn make(&self, bytes: usize) -> Result<DeviceBlock, PoolError> {
        let size = bytes.max(4).next_multiple_of(4);
        if size as u64 > self.max_buffer_size {
            return Err(PoolError::AllocationFailed {
                bytes: size,
                reason: format!(
                    "the device's max_buffer_size is {} bytes",
                    self.max_buffer_size
                ),
            });
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(self.label),
            size: size as u64,
            usage: self.usage,
            mapped_at_creation: false,
        });
        if let Some(err) = block_on(scope.pop()) {
            return Err(PoolError::AllocationFailed {
                bytes: size,
                reason: err.to_string(),
            });
        }
        self.live.fetch_add(1, Ordering::AcqRel);
        Ok(DeviceBlock {
            buffer,
            size,
            last_use: AtomicU64::new(0),
            live: Arc::clone(&self.live),
        })
    }

    /// Device buffers made by every `DeviceMemory` sharing this counter and not yet
    /// dropped.
    pub fn live_buffers(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

impl Memory for DeviceMemory {
    type Block = DeviceBlock;

    fn allocate(&self, bytes: usize) -> Result<DeviceBlock, PoolError> {
        self.make(bytes)
    }

    fn block_size(&self, block: &DeviceBlock) -> usize {
        block.size
    }

    /// Ready once the last submission that used the block has completed.
    fn is_ready(&self, block: &DeviceBlock) -> bool {
        self.tracker.is_done(block.last_use())
    }
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("label", &self.label)
            .field("usage", &self.usage)
            .field("live_buffers", &self.live_buffers())
            .finish()
    }
}
