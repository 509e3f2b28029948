//! `GpuBackend`: the public handle on one device, its pools and its kernels.

use std::fmt;
use std::sync::Arc;

use tempra_pool::{BufferPool, HostPool};
use tempra_tensor::{
    DType, ExecContext, HandoffCounter, Handoffs, Layout, ReferenceBackend, Storage, Tensor,
};

use crate::device::{AdapterSummary, open};
use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::kernels::is_gpu_block;
use crate::memory::DeviceMemory;
use crate::operand::gpu_storage;
use crate::options::GpuOptions;
use crate::storage::{DeviceBuffer, GpuStorage};

/// The GPU backend: a wgpu device, its WGSL kernels and a device buffer pool.
///
/// Cheap to clone (the device is shared). Use it through an [`ExecContext`]
/// ([`GpuBackend::exec_context`]); tensors it makes live in device memory and convert to
/// host tensors with [`GpuBackend::to_host`].
///
/// ```no_run
/// use tempra_backend_gpu::GpuBackend;
///
/// let gpu = match GpuBackend::new() {
///     Ok(gpu) => gpu,
///     Err(e) => { eprintln!("no GPU, using the CPU: {e}"); return Ok(()); }
/// };
/// let ctx = gpu.exec_context();
/// let a = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
/// let y = ctx.matmul(&a, &a.t()?)?; // runs on the GPU
/// assert_eq!(y.to_vec_f32()?, [5.0, 11.0, 11.0, 25.0]); // reads back
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct GpuBackend {
    pub(crate) ctx: Arc<DeviceContext>,
    pub(crate) reference: ReferenceBackend,
    fallbacks: Arc<HandoffCounter>,
}

impl GpuBackend {
    /// A backend on the adapter [`GpuOptions::from_env`] selects.
    ///
    /// Errors: [`GpuError::NoAdapter`] when there is no usable GPU (callers fall back to
    /// the CPU), or a device-creation error.
    pub fn new() -> Result<Self> {
        Self::with_options(&GpuOptions::from_env())
    }

    /// A backend configured by `options`.
    pub fn with_options(options: &GpuOptions) -> Result<Self> {
        let opened = open(options)?;
        let ctx = Arc::new(DeviceContext::new(opened, options)?);
        Ok(Self {
            ctx,
            reference: ReferenceBackend::new(HostPool::host()),
            fallbacks: Arc::default(),
        })
    }

    /// An [`ExecContext`] running on this backend.
    pub fn exec_context(&self) -> ExecContext {
        ExecContext::new(Arc::new(self.clone()))
    }

    /// The adapter the device runs on.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.ctx.summary
    }

    /// Whether kernels use f16 arithmetic (the device has `SHADER_F16`).
    pub fn has_f16(&self) -> bool {
        self.ctx.f16
    }

    /// The device pool facade ops take their outputs from.
    pub fn pool(&self) -> &BufferPool<DeviceMemory> {
        &self.ctx.pool
    }

    /// Device buffers alive now: pooled (leased or cached), session-lifetime, parameter
    /// and staging buffers.
    pub fn live_buffers(&self) -> usize {
        self.ctx.live_buffers()
    }

    /// The wgpu device, for custom kernels. Work submitted directly bypasses the
    /// backend's recorder: call [`Self::flush`] first to keep program order.
    pub fn device(&self) -> &wgpu::Device {
        &self.ctx.device
    }

    /// The wgpu queue. See [`Self::device`] about ordering.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.ctx.queue
    }

    /// Compiled pipelines so far.
    pub fn pipelines_compiled(&self) -> usize {
        self.ctx.pipelines.len()
    }

    /// Counts one call of `op` run on the host (reported by [`Backend::handoffs`]).
    ///
    /// [`Backend::handoffs`]: tempra_tensor::Backend::handoffs
    pub(crate) fn count_fallback(&self, op: &'static str) {
        self.fallbacks.count(op);
    }

    /// The host-fallback counts ([`Backend::handoffs`]).
    ///
    /// [`Backend::handoffs`]: tempra_tensor::Backend::handoffs
    pub(crate) fn fallback_counts(&self) -> Handoffs {
        self.fallbacks.snapshot()
    }

    /// Submits all recorded work without waiting.
    pub fn flush(&self) -> Result<()> {
        self.ctx.flush()
    }

    /// Submits all recorded work and waits until the GPU has finished it; reports any
    /// device error raised meanwhile.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize("synchronize")
    }

    /// Waits for the GPU, then frees every cached (idle) buffer of the device pools, the
    /// rope tables and the kernels' scratch buffers. Returns the bytes freed from the
    /// pools.
    pub fn trim(&self) -> Result<usize> {
        self.synchronize()?;
        self.ctx.clear_kept_buffers();
        Ok(self.ctx.pool.trim() + self.ctx.params_pool.trim() + self.ctx.staging_pool.trim())
    }

    /// Copies a tensor (any storage, any layout) into a new contiguous device buffer
    /// outside the pool (session-lifetime data such as weights), keeping its dtype.
    pub fn upload(&self, t: &Tensor) -> Result<Tensor> {
        let host = self.contiguous_host(t)?;
        let layout = Layout::contiguous(*host.shape(), host.dtype())?;
        let bytes = host.storage().host_bytes()?;
        let range = host
            .layout()
            .contiguous_range()
            .map(|r| r.start * host.dtype().block_bytes()..r.end * host.dtype().block_bytes())
            .unwrap_or(0..bytes.len());
        let data = &bytes[range];
        let block =
            self.ctx
                .owned_memory
                .make(data.len().max(4))
                .map_err(|e| GpuError::Device {
                    op: "upload",
                    message: e.to_string(),
                })?;
        self.ctx.write_bytes(&block, 0, data)?;
        let storage = GpuStorage::new(
            DeviceBuffer::Owned(block),
            data.len(),
            Arc::clone(&self.ctx),
        );
        Ok(Tensor::from_storage(
            Storage::Device(Box::new(storage)),
            layout,
        )?)
    }

    /// Like [`Self::upload`], but a block dtype without a GPU kernel (Q4_1, Q5_0, Q5_1,
    /// Q2_K, Q3_K, Q8_1, Q8_K) is dequantized to F16 first, with a line on stderr saying
    /// so: weights that `linear` and `embedding` then run on the GPU.
    pub fn upload_weight(&self, t: &Tensor) -> Result<Tensor> {
        let dtype = t.dtype();
        if dtype.is_quantized() && !is_gpu_block(dtype) {
            eprintln!(
                "tempra-backend-gpu: {dtype} has no GPU kernel; converting a {} weight to f16 \
                 at upload",
                t.shape()
            );
            let reference = ExecContext::new(Arc::new(self.reference.clone()));
            let host = self.to_host(t)?;
            let converted = reference.cast(&host, DType::F16)?;
            return self.upload(&converted);
        }
        self.upload(t)
    }

    /// A host tensor with `t`'s layout over a copy of the bytes that layout addresses
    /// (read back from the device; a host tensor is returned as is).
    pub fn to_host(&self, t: &Tensor) -> Result<Tensor> {
        if t.storage().is_host() {
            return Ok(t.clone());
        }
        let spanned = t.layout().bytes_spanned();
        let mut storage = Storage::owned_zeroed(spanned)?;
        let start = t.layout().offset() * t.dtype().block_bytes();
        if spanned > start {
            let dst = &mut storage.host_bytes_mut()?[start..spanned];
            t.storage().read_bytes(start, dst)?;
        }
        Ok(Tensor::from_storage(storage, *t.layout())?)
    }

    /// `t` on the host as a contiguous tensor.
    fn contiguous_host(&self, t: &Tensor) -> Result<Tensor> {
        let host = self.to_host(t)?;
        if host.is_contiguous() {
            return Ok(host);
        }
        let reference = ExecContext::new(Arc::new(self.reference.clone()));
        Ok(reference.contiguous(&host)?)
    }

    /// Whether `t` lives in this backend's device memory.
    pub fn owns(&self, t: &Tensor) -> bool {
        gpu_storage(t).is_some_and(|g| g.is_on(&self.ctx))
    }
}

impl fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBackend")
            .field("device", &self.ctx)
            .finish()
    }
}
