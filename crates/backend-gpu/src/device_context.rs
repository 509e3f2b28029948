//! `DeviceContext`: one opened device and everything shared by the backend and its
//! tensors: the queue, submission tracking, the pipeline cache, the recorder of pending
//! work and the buffer pools.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tempra_pool::{BufferPool, PoolConfig};

use crate::device::{AdapterSummary, ErrorSink, OpenedDevice};
use crate::error::{GpuError, Result};
use crate::kernel_scratch::KernelScratch;
use crate::memory::{DeviceBlock, DeviceMemory};
use crate::options::GpuOptions;
use crate::pipeline_cache::PipelineCache;
use crate::recorder::Recorder;
use crate::submission::SubmissionTracker;
use crate::window::{BindingRules, BufferWindow};

/// Bytes of one parameter buffer: many dispatches' parameter slots.
pub(crate) const PARAMS_BUFFER_BYTES: usize = 64 * 1024;

/// Shared state of one device.
pub(crate) struct DeviceContext {
    pub(crate) summary: AdapterSummary,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    /// Whether kernels may use f16 arithmetic.
    pub(crate) f16: bool,
    pub(crate) errors: ErrorSink,
    pub(crate) tracker: Arc<SubmissionTracker>,
    pub(crate) pipelines: PipelineCache,
    pub(crate) rules: BindingRules,
    /// The most workgroups along one dispatch dimension.
    pub(crate) max_workgroups: u32,
    /// Bytes between parameter slots (512 rounded up to the uniform offset alignment).
    pub(crate) param_slot_bytes: usize,
    /// Tensors: STORAGE | COPY_SRC | COPY_DST.
    pub(crate) pool: BufferPool<DeviceMemory>,
    /// Parameter blocks: UNIFORM | COPY_DST.
    pub(crate) params_pool: BufferPool<DeviceMemory>,
    /// Read-back staging: MAP_READ | COPY_DST.
    pub(crate) staging_pool: BufferPool<DeviceMemory>,
    /// Non-pooled tensor buffers (uploaded weights).
    pub(crate) owned_memory: DeviceMemory,
    /// Persistent allocations through the seam (KV caches, step arenas).
    pub(crate) persistent_memory: DeviceMemory,
    /// Device buffers alive, made by any of the above.
    pub(crate) live: Arc<AtomicUsize>,
    /// A small buffer bound where a kernel's optional input is absent.
    placeholder: DeviceBlock,
    /// Rope frequency tables by content (see [`DeviceContext::rope_table`]).
    rope_tables: Mutex<Vec<(Vec<u8>, Arc<DeviceBlock>)>>,
    /// `expert_linear`'s rows grouped by expert.
    pub(crate) expert_grouping: KernelScratch,
    recorder: Mutex<Recorder>,
}

impl DeviceContext {
    pub(crate) fn new(opened: OpenedDevice, options: &GpuOptions) -> Result<Self> {
        let OpenedDevice {
            summary,
            device,
            queue,
            f16,
            errors,
        } = opened;
        let limits = device.limits();
        let tracker = Arc::new(SubmissionTracker::default());
        let live = Arc::new(AtomicUsize::new(0));
        let memory = |usage, label| {
            DeviceMemory::new(
                device.clone(),
                usage,
                label,
                Arc::clone(&tracker),
                Arc::clone(&live),
            )
        };
        use wgpu::BufferUsages as U;
        let tensor_usage = U::STORAGE | U::COPY_SRC | U::COPY_DST;
        let pool = BufferPool::with_config(memory(tensor_usage, "tempra tensor"), options.pool);
        let small = PoolConfig {
            max_cached_bytes: 16 << 20,
        };
        let params_pool =
            BufferPool::with_config(memory(U::UNIFORM | U::COPY_DST, "tempra params"), small);
        let staging_pool = BufferPool::with_config(
            memory(U::MAP_READ | U::COPY_DST, "tempra read-back"),
            PoolConfig {
                max_cached_bytes: 64 << 20,
            },
        );
        let owned_memory = memory(tensor_usage, "tempra weight");
        let persistent_memory = memory(tensor_usage, "tempra persistent");
        let placeholder = memory(tensor_usage, "tempra placeholder")
            .make(16)
            .map_err(|e| GpuError::Device {
                op: "open",
                message: e.to_string(),
            })?;
        let max_binding = options
            .max_binding_bytes
            .map_or(limits.max_storage_buffer_binding_size, |cap| {
                cap.min(limits.max_storage_buffer_binding_size)
            });
        let rules = BindingRules {
            align: limits.min_storage_buffer_offset_alignment.max(4) as u64,
            max_size: max_binding - max_binding % 4,
        };
        let max_workgroups = options
            .max_workgroups_per_dim
            .map_or(limits.max_compute_workgroups_per_dimension, |cap| {
                cap.clamp(1, limits.max_compute_workgroups_per_dimension)
            });
        let param_slot_bytes = (crate::params::PARAM_WORDS * 4)
            .next_multiple_of(limits.min_uniform_buffer_offset_alignment.max(4) as usize);
        Ok(Self {
            summary,
            device,
            queue,
            f16,
            errors,
            tracker,
            pipelines: PipelineCache::default(),
            rules,
            max_workgroups,
            param_slot_bytes,
            pool,
            params_pool,
            staging_pool,
            owned_memory,
            persistent_memory,
            live,
            placeholder,
            rope_tables: Mutex::new(Vec::new()),
            expert_grouping: KernelScratch::default(),
            recorder: Mutex::new(Recorder::default()),
        })
    }

    /// The device buffer holding a rope table whose first bytes are `inv` (the inverse
    /// frequencies), with `extra` more bytes after them for frequency factors, made and
    /// written once per distinct table and then shared by every rope call. A pooled
    /// per-call scratch was reusable only once the GPU had finished the call before, so
    /// how many a step allocated depended on how far the GPU lagged; a shared table is
    /// safe because its host-written bytes never change (the factors are copied in
    /// order within the command stream). [`Self::clear_kept_buffers`] frees them.
    pub(crate) fn rope_table(&self, inv: &[u8], extra: usize) -> Result<Arc<DeviceBlock>> {
        /// Distinct tables kept (a model has one or two rope configurations).
        const KEEP: usize = 16;
        let mut key = inv.to_vec();
        key.extend_from_slice(&(extra as u64).to_le_bytes());
        let mut tables = self.rope_tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, block)) = tables.iter().find(|(k, _)| *k == key) {
            return Ok(Arc::clone(block));
        }
        let block = Arc::new(
            self.owned_memory
                .make((inv.len() + extra).max(4))
                .map_err(|e| GpuError::Device {
                    op: "rope",
                    message: e.to_string(),
                })?,
        );
        self.write_bytes(&block, 0, inv)?;
        if tables.len() == KEEP {
            tables.remove(0);
        }
        tables.push((key, Arc::clone(&block)));
        Ok(block)
    }

    /// Frees the cached rope tables and the kernels' scratch buffers (each goes once no
    /// call in flight uses it).
    pub(crate) fn clear_kept_buffers(&self) {
        self.rope_tables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.expert_grouping.clear();
    }

    /// A binding of the placeholder buffer, for an absent optional input.
    pub(crate) fn placeholder(&self) -> BufferWindow<'_> {
        BufferWindow {
            block: &self.placeholder,
            offset: 0,
            size: 16,
        }
    }

    /// The recorder, locked (a poisoned lock is still consistent: every update is a
    /// plain assignment or a wgpu call).
    pub(crate) fn recorder(&self) -> MutexGuard<'_, Recorder> {
        self.recorder.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Device buffers alive now (pooled, cached, owned, parameter and staging).
    pub(crate) fn live_buffers(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Advances completion tracking without blocking, when work is in flight.
    pub(crate) fn poll_completions(&self) {
        if self.tracker.in_flight() {
            // A failed non-blocking poll leaves the tracker behind (blocks look busy a
            // little longer); the next blocking operation reports device errors.
            let _ = self.device.poll(wgpu::PollType::Poll);
        }
    }
}

impl fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceContext")
            .field("adapter", &self.summary)
            .field("f16", &self.f16)
            .field("pipelines", &self.pipelines.len())
            .field("live_buffers", &self.live_buffers())
            .finish()
    }
}
