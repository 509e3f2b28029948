//! Host ↔ device transfers through staging buffers.
//!
//! - Host → device: `Queue::write_buffer`, which copies the bytes into a staging buffer
//!   of wgpu's and schedules the copy before the next submission's commands. When the
//!   destination is bound by recorded (not yet submitted) work, that work is submitted
//!   first, so the write lands after it, as program order says.
//! - Device → host: a copy into a pooled `MAP_READ` staging buffer, submitted after all
//!   recorded work, then mapped (blocking until the GPU is done).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::memory::DeviceBlock;

/// How long a read-back waits for its buffer to map before reporting a device error.
const MAP_TIMEOUT: Duration = Duration::from_secs(300);

impl DeviceContext {
    /// Copies `dst.len()` bytes from `block` at byte `offset` to the host, after all work
    /// recorded so far.
    pub(crate) fn read_back(
        &self,
        block: &DeviceBlock,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        const OP: &str = "read_back";
        if dst.is_empty() {
            return Ok(());
        }
        let start = offset - offset % 4;
        let end = (offset + dst.len()).next_multiple_of(4);
        if end > block.size() {
            return Err(GpuError::Device {
                op: OP,
                message: format!(
                    "bytes {offset}..{} past a {}-byte buffer",
                    offset + dst.len(),
                    block.size()
                ),
            });
        }
        let len = (end - start) as u64;
        let staging = self
            .staging_pool
            .acquire(end - start)
            .map_err(|e| GpuError::Device {
                op: OP,
                message: e.to_string(),
            })?;
        {
            let mut rec = self.recorder();
            self.flush_locked(&mut rec)?;
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("tempra read-back"),
                });
            encoder.copy_buffer_to_buffer(
                block.buffer(),
                start as u64,
                staging.block().buffer(),
                0,
                len,
            );
            let index = self.tracker.submit(&self.queue, [encoder.finish()]);
            block.stamp(index);
            staging.block().stamp(index);
        }
        let slice = staging.block().buffer().slice(0..len);
        let mapped: Arc<Mutex<Option<Result<(), wgpu::BufferAsyncError>>>> = Arc::default();
        let sink = Arc::clone(&mapped);
        slice.map_async(wgpu::MapMode::Read, move |r| {
            *sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        });
        let outcome = self.wait_for_map(&mapped);
        if let Err(e) = outcome {
            // The buffer may still be mapped or have a mapping pending: never reuse it
            // (the pool frees it on the next trim).
            staging.block().retire();
            return Err(e);
        }
        {
            let view = slice.get_mapped_range().map_err(|e| {
                staging.block().retire();
                GpuError::Device {
                    op: OP,
                    message: e.to_string(),
                }
            })?;
            let at = offset - start;
            dst.copy_from_slice(&view[at..at + dst.len()]);
        }
        staging.block().buffer().unmap();
        self.errors.check(OP)
    }

    /// Polls until the mapping callback has reported. With several threads polling, the
    /// callback may run on another thread's poll shortly after this thread's wait
    /// returned, so this polls again (yielding) until it has.
    fn wait_for_map(
        &self,
        mapped: &Mutex<Option<Result<(), wgpu::BufferAsyncError>>>,
    ) -> Result<()> {
        const OP: &str = "read_back";
        let deadline = Instant::now() + MAP_TIMEOUT;
        loop {
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| GpuError::Device {
                    op: OP,
                    message: e.to_string(),
                })?;
            let outcome = mapped.lock().unwrap_or_else(|p| p.into_inner()).take();
            match outcome {
                Some(Ok(())) => return Ok(()),
                Some(Err(e)) => {
                    return Err(GpuError::Device {
                        op: OP,
                        message: e.to_string(),
                    });
                }
                None if Instant::now() > deadline => {
                    return Err(GpuError::Device {
                        op: OP,
                        message: format!(
                            "the read-back buffer was not mapped within {MAP_TIMEOUT:?}"
                        ),
                    });
                }
                None => std::thread::yield_now(),
            }
        }
    }

    /// Writes `data` into `block` at byte `offset`, after all work recorded so far.
    /// Unaligned edges (offsets or lengths not a multiple of 4) are merged with the bytes
    /// already there (read back first).
    pub(crate) fn write_bytes(
        &self,
        block: &DeviceBlock,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let start = offset - offset % 4;
        let end = (offset + data.len()).next_multiple_of(4);
        if end > block.size() {
            return Err(GpuError::Device {
                op: "write_bytes",
                message: format!(
                    "bytes {offset}..{} past a {}-byte buffer",
                    offset + data.len(),
                    block.size()
                ),
            });
        }
        if start == offset && end == offset + data.len() {
            return self.write_aligned(block, offset, data);
        }
        let mut merged = vec![0u8; end - start];
        if offset != start {
            self.read_back(block, start, &mut merged[..4])?;
        }
        if end != offset + data.len() {
            let tail = merged.len() - 4;
            self.read_back(block, end - 4, &mut merged[tail..])?;
        }
        merged[offset - start..offset - start + data.len()].copy_from_slice(data);
        self.write_aligned(block, start, &merged)
    }

    fn write_aligned(&self, block: &DeviceBlock, offset: usize, data: &[u8]) -> Result<()> {
        let mut rec = self.recorder();
        if block.last_use() >= self.tracker.recording() {
            // Recorded work binds this buffer: submit it so the write lands after it.
            self.flush_locked(&mut rec)?;
        }
        self.queue.write_buffer(block.buffer(), offset as u64, data);
        // The write executes with the next submission.
        block.stamp(self.tracker.recording());
        Ok(())
    }
}
