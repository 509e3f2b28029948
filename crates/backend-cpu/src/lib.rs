//! tempra-backend-cpu: a fast CPU implementation of every facade op.
//!
//! [`CpuBackend`] implements [`tempra_tensor::Backend`] with SIMD kernels chosen at run
//! time ([`Isa`]: AVX-512, AVX2+FMA+F16C or portable scalar code; the binary targets
//! baseline x86-64) and a persistent [`WorkerPool`] sized to the physical cores.
//!
//! ```
//! use std::sync::Arc;
//! use tempra_backend_cpu::CpuBackend;
//! use tempra_tensor::{ExecContext, tempra_pool::HostPool};
//!
//! let ctx = ExecContext::new(Arc::new(CpuBackend::new(HostPool::host())));
//! let x = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let w = ctx.from_slice(&[1.0f32, 1.0], &[2])?;
//! let y = ctx.softmax(&ctx.rms_norm(&x, &w, 1e-6)?)?;
//! assert_eq!(y.dims(), &[2, 2]);
//! # Ok::<(), tempra_tensor::TensorError>(())
//! ```
//!
//! Layout of the crate: [`isa`] (detection, the checked [`Level`]), `simd` (the vector
//! vocabulary kernels are written in, once) with its tokens in `scalar` and `x86`,
//! `math` (vectorised exp/log/tanh/...), `kernels` (row kernels over contiguous slices),
//! `ops` (layouts, dtypes and threading around them), [`workers`] (the thread pool), and
//! the products (`gemm`, `linear`, `matmul`, `quantized`) with the prepared weight
//! layouts of [`interleaved`]; [`memory_bandwidth`] measures
//! the streaming read rate decode speed is judged against.

mod backend;
mod config;
mod experts;
mod gemm;
pub mod interleaved;
pub mod isa;
mod kernels;
mod linear;
mod math;
mod matmul;
pub mod memory_bandwidth;
mod ops;
mod parallel;
mod prefetch;
mod prepare;
mod products;
mod quantized;
mod scalar;
mod simd;
mod strided;
mod task_scratch;
pub mod workers;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use backend::CpuBackend;
pub use config::CpuConfig;
pub use isa::{CpuFeatures, Isa, Level};
pub use workers::WorkerPool;
