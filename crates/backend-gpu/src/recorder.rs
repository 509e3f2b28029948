//! Recording and submitting work: dispatches accumulate in one command encoder and are
//! submitted together (on a read-back, every [`FLUSH_EVERY`] dispatches, or on
//! [`crate::GpuBackend::flush`]).
//!
//! Each dispatch's parameters go to a slot of a pooled uniform buffer; the slots are
//! written with one `Queue::write_buffer` right before the submit (wgpu applies such
//! writes before the submitted commands). Every buffer a dispatch binds is stamped with
//! the index the batch will be submitted under, so the pool does not hand it out again
//! before that submission has completed.

use tempra_pool::Lease;

use crate::device_context::{DeviceContext, PARAMS_BUFFER_BYTES};
use crate::error::{GpuError, Result};
use crate::memory::{DeviceBlock, DeviceMemory};
use crate::params::Params;
use crate::pipeline_cache::KernelSpec;
use crate::window::BufferWindow;

/// Dispatches recorded before a submit is forced (keeps the GPU busy while recording).
pub(crate) const FLUSH_EVERY: usize = 32;

/// Work recorded but not yet submitted.
#[derive(Default)]
pub(crate) struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    /// The parameter words of every slot used so far.
    params: Vec<u32>,
    params_buffer: Option<Lease<DeviceMemory>>,
    slots: usize,
    dispatches: usize,
}

/// Splits `total` workgroups into a 2-D grid `(x, y)` with `x <= max`: kernels recover
/// the linear index as `y * x_count + x` and skip indices past `total`.
pub(crate) fn grid(total: u32, max: u32) -> (u32, u32) {
    if total <= max {
        (total, 1)
    } else {
        (max, total.div_ceil(max))
    }
}

impl DeviceContext {
    /// Records one dispatch of `total` workgroups (a 2-D grid when over the per-dimension
    /// limit) of `spec`, with `params` and storage `bindings` in `@binding(1..)` order.
    pub(crate) fn dispatch(
        &self,
        spec: &KernelSpec,
        params: &Params,
        bindings: &[BufferWindow<'_>],
        total: u32,
    ) -> Result<()> {
        if total == 0 {
            return Ok(());
        }
        debug_assert_eq!(bindings.len(), spec.bindings.len(), "{}", spec.name);
        let pipeline = self.pipelines.get(&self.device, spec)?;
        let slot_words = self.param_slot_bytes / 4;
        let slots_per_buffer = PARAMS_BUFFER_BYTES / self.param_slot_bytes;
        let mut rec = self.recorder();
        if rec.params_buffer.is_some() && rec.slots == slots_per_buffer {
            self.flush_locked(&mut rec)?;
        }
        if rec.params_buffer.is_none() {
            let lease =
                self.params_pool
                    .acquire(PARAMS_BUFFER_BYTES)
                    .map_err(|e| GpuError::Device {
                        op: "dispatch",
                        message: e.to_string(),
                    })?;
            rec.params_buffer = Some(lease);
            rec.params.clear();
            rec.slots = 0;
        }
        let slot = rec.slots;
        rec.slots += 1;
        rec.params.resize((slot + 1) * slot_words, 0);
        let words = params.words();
        rec.params[slot * slot_words..slot * slot_words + words.len()].copy_from_slice(words);

        let index = self.tracker.recording();
        let Some(params_block) = rec.params_buffer.as_ref().map(|l| l.block()) else {
            return Err(GpuError::Device {
                op: "dispatch",
                message: "no parameter buffer".into(),
            });
        };
        params_block.stamp(index);
        let mut entries = Vec::with_capacity(bindings.len() + 1);
        entries.push(wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: params_block.buffer(),
                offset: (slot * self.param_slot_bytes) as u64,
                size: wgpu::BufferSize::new((crate::params::PARAM_WORDS * 4) as u64),
            }),
        });
        for (i, w) in bindings.iter().enumerate() {
            w.block.stamp(index);
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: w.block.buffer(),
                    offset: w.offset,
                    size: wgpu::BufferSize::new(w.size),
                }),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(spec.name),
            layout: &pipeline.layout,
            entries: &entries,
        });
        let (x, y) = grid(total, self.max_workgroups);
        let device = &self.device;
        let encoder = rec.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("tempra batch"),
            })
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(spec.name),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(x, y, 1);
        }
        rec.dispatches += 1;
        if rec.dispatches >= FLUSH_EVERY {
            self.flush_locked(&mut rec)?;
        }
        Ok(())
    }

    /// Records a buffer-to-buffer copy of `len` bytes (offsets and length multiples of 4,
    /// different buffers), in order with the recorded dispatches.
    pub(crate) fn record_copy(
        &self,
        src: &DeviceBlock,
        src_offset: u64,
        dst: &DeviceBlock,
        dst_offset: u64,
        len: u64,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let mut rec = self.recorder();
        let index = self.tracker.recording();
        src.stamp(index);
        dst.stamp(index);
        let device = &self.device;
        let encoder = rec.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("tempra batch"),
            })
        });
        encoder.copy_buffer_to_buffer(src.buffer(), src_offset, dst.buffer(), dst_offset, len);
        rec.dispatches += 1;
        if rec.dispatches >= FLUSH_EVERY {
            self.flush_locked(&mut rec)?;
        }
        Ok(())
    }

    /// Records zeroing `len` bytes of `dst` from `offset` (multiples of 4).
    pub(crate) fn record_clear(&self, dst: &DeviceBlock, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let mut rec = self.recorder();
        dst.stamp(self.tracker.recording());
        let device = &self.device;
        let encoder = rec.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("tempra batch"),
            })
        });
        encoder.clear_buffer(dst.buffer(), offset, Some(len));
        rec.dispatches += 1;
        if rec.dispatches >= FLUSH_EVERY {
            self.flush_locked(&mut rec)?;
        }
        Ok(())
    }

    /// Submits everything recorded.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut rec = self.recorder();
        self.flush_locked(&mut rec)
    }

    /// Submits everything recorded; the caller holds the recorder's lock.
    pub(crate) fn flush_locked(&self, rec: &mut Recorder) -> Result<()> {
        let Some(encoder) = rec.encoder.take() else {
            return self.errors.check("flush");
        };
        if let Some(lease) = &rec.params_buffer {
            let bytes: &[u8] = bytemuck::cast_slice(&rec.params);
            self.queue.write_buffer(lease.block().buffer(), 0, bytes);
        }
        self.tracker.submit(&self.queue, [encoder.finish()]);
        // Back to the pool, stamped with this submission: reused once it completed.
        rec.params_buffer = None;
        rec.params.clear();
        rec.slots = 0;
        rec.dispatches = 0;
        self.errors.check("flush")
    }

    /// Submits everything recorded and waits until the GPU has finished all of it.
    pub(crate) fn synchronize(&self, op: &'static str) -> Result<()> {
        self.flush()?;
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Device {
                op,
                message: e.to_string(),
            })?;
        self.errors.check(op)
    }
}

#[cfg(test)]
mod tests {
    use super::grid;

    #[test]
    fn grid_splits_past_the_limit() {
        assert_eq!(grid(10, 65535), (10, 1));
        assert_eq!(grid(65535, 65535), (65535, 1));
        assert_eq!(grid(65536, 65535), (65535, 2));
        assert_eq!(grid(7, 3), (3, 3));
    }
}
