//! The GPU engine (cargo feature `gpu`): the same transformer as the CPU engine, run as
//! WGSL kernels of tempra-backend-gpu over a [`tempra_backend_gpu::BufferArena`] per
//! session.
//!
//! A [`crate::engine::Model`] loaded with [`crate::engine::BackendKind::Gpu`] uploads its
//! weights once (quantized matrices stay quantized where the kernels read the format; see
//! `weights.rs`); each [`crate::engine::Session`] allocates one arena holding its KV
//! cache and every intermediate of a step, sized from the model config, and a step then
//! allocates no device memory. Config, weight loading, tokenizer, sampler, generation
//! and the `Session` API are the CPU engine's.

mod engine;
mod forward;
mod session;
mod weights;

pub(crate) use engine::GpuEngine;
pub(crate) use session::GpuSession;
