//! tempra-backend-gpu: tempra's GPU backend on wgpu (Vulkan, Metal, DX12).
//!
//! - [`GpuBackend`] implements tempra-tensor's [`tempra_tensor::Backend`] seam with device
//!   storage ([`GpuStorage`]): elementwise ops with broadcasting, reductions, argmax,
//!   softmax, rms/layer norm, rope, embedding, tiled matmul, `linear` with in-shader
//!   dequantization (F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), causal attention (GQA,
//!   sliding window, soft-cap), copies, casts and fill run as WGSL kernels; the rest runs
//!   on the host through the reference kernels (see [`fallback`](crate#host-fallbacks)).
//! - Device selection ([`GpuOptions`], `TEMPRA_GPU_ADAPTER`): no adapter is a
//!   [`GpuError::NoAdapter`], so callers fall back to the CPU.
//! - Device pool: a [`tempra_pool::BufferPool`] over [`DeviceMemory`]; a released buffer is
//!   handed out again only after the GPU work that used it completed.
//! - Persistent allocations (`Backend::allocate_persistent`: KV caches, step arenas) are
//!   device buffers outside the pool, zeroed when made, freed when their last view drops.
//!
//! ```no_run
//! use tempra_backend_gpu::GpuBackend;
//!
//! let gpu = GpuBackend::new()?; // Err(GpuError::NoAdapter { .. }) without a GPU
//! let ctx = gpu.exec_context();
//! let x = ctx.randn(&[4, 64], tempra_tensor::DType::F32, 0.0, 1.0, 7)?; // on the GPU
//! let w = ctx.full(&[64], tempra_tensor::DType::F32, 1.0)?;
//! let y = ctx.rms_norm(&x, &w, 1e-6)?; // a WGSL kernel
//! let host = gpu.to_host(&y)?; // a host tensor with y's layout
//! assert_eq!(host.dims(), [4, 64]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Host fallbacks
//!
//! F64 tensors (WGSL has no f64), `quantize`, conversions to/from F64, dequantizing
//! block formats without a shader (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q8_1, Q8_K: upload such
//! weights with [`GpuBackend::upload_weight`] to convert them to F16), the training ops
//! (`embedding_backward`, `one_hot`, `cross_entropy`, `cross_entropy_backward`,
//! `attention_backward`) and attention with head dims over 512 read their inputs back,
//! run the reference kernel and upload the result. `Backend::handoffs`
//! (`ExecContext::handoffs`) counts them.

mod backend;
mod block_on;
mod device;
mod device_context;
mod error;
mod fallback;
mod kernel_scratch;
mod kernels;
mod memory;
mod operand;
mod options;
mod params;
mod pipeline_cache;
mod recorder;
mod seam;
mod storage;
mod submission;
mod transfer;
mod window;

pub use backend::GpuBackend;
pub use device::{AdapterSummary, list_adapters};
pub use error::{GpuError, Result};
pub use memory::{DeviceBlock, DeviceMemory};
pub use options::{ADAPTER_ENV, GpuOptions};
pub use storage::GpuStorage;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The name of this backend and of its device storage.
pub const BACKEND_NAME: &str = "wgpu";
