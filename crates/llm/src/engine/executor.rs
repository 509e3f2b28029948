//! `Executor`: where a model's ops run — the backend's exec context and the one step
//! arena every session of the model shares (sessions own their KV caches).
//!
//! Opening the backend and putting the weights in its layout (the CPU's interleaved
//! rows, the GPU's device upload) is the only backend-specific code of the engine; the
//! forward, the model, the sessions and the batched decode run on whatever this opened.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tempra_autograd::Autograd;
use tempra_backend_cpu::{CpuBackend, CpuConfig};
use tempra_pool::HostPool;
use tempra_tensor::{ExecContext, ReferenceBackend};

use crate::engine::model::{BackendKind, LoadOptions};
use crate::engine::outputs::Outputs;
use crate::engine::step_arena::{ArenaCapacity, ArenaStats, StepArena};
use crate::engine::weights::ModelWeights;
use crate::error::{LlmError, Result};
use crate::model_config::ModelConfig;
use crate::model_file::ModelFile;

/// A model's GPU backend handle, where it has one (only with the `gpu` cargo feature).
#[cfg(feature = "gpu")]
type GpuHandle = Option<tempra_backend_gpu::GpuBackend>;
/// A model's GPU backend handle, where it has one (only with the `gpu` cargo feature).
#[cfg(not(feature = "gpu"))]
type GpuHandle = ();

/// A backend, its exec context (through the autograd handle) and the step arena.
#[derive(Debug)]
pub struct Executor {
    kind: BackendKind,
    autograd: Autograd,
    threads: usize,
    /// The arena's rows (fixed when it is made).
    capacity: ArenaCapacity,
    arena: Mutex<StepArena>,
    /// Steps that found the arena in use by another thread and took their outputs from
    /// the pool.
    busy_steps: AtomicU64,
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    gpu: GpuHandle,
}

impl Executor {
    /// Opens `options.backend` (on the CPU with `options.threads` workers and
    /// `options.fast_prefill`) and allocates the step arena for `config` at `capacity`.
    ///
    /// Errors: no GPU adapter or a build without the `gpu` feature
    /// ([`BackendKind::Gpu`]), or the arena's allocation failing.
    pub(crate) fn open(
        options: &LoadOptions,
        config: &ModelConfig,
        capacity: ArenaCapacity,
    ) -> Result<Executor> {
        let pool = HostPool::host();
        #[allow(clippy::let_unit_value)]
        let mut gpu: GpuHandle = Default::default();
        let kind = options.backend;
        let (ctx, threads) = match kind {
            BackendKind::Cpu => {
                let cpu = CpuConfig {
                    isa: None,
                    threads: options.threads.map(|n| n.max(1)),
                    fast_prefill: options.fast_prefill,
                };
                let backend = CpuBackend::with_config(pool, cpu)?;
                let threads = backend.threads();
                (ExecContext::new(std::sync::Arc::new(backend)), threads)
            }
            BackendKind::Reference => (
                ExecContext::new(std::sync::Arc::new(ReferenceBackend::new(pool))),
                1,
            ),
            BackendKind::Gpu => {
                let (ctx, handle) = open_gpu()?;
                gpu = handle;
                (ctx, 1)
            }
        };
        let arena = StepArena::new(
            &ctx,
            format!("{} step arena", ctx.backend().name()),
            config,
            capacity,
        )?;
        Ok(Executor {
            kind,
            autograd: Autograd::new(ctx),
            threads,
            capacity,
            arena: Mutex::new(arena),
            busy_steps: AtomicU64::new(0),
            gpu,
        })
    }

    /// The weights in the layout this backend reads fastest, or `None` to run them as
    /// the file holds them: on the CPU (when `prepare`) the matrices `linear` reads in
    /// its interleaved rows, letting the file's pages of each original go; on the GPU
    /// every tensor uploaded to device memory (see [`crate::engine::device_weights`]).
    pub(crate) fn prepare_weights(
        &self,
        weights: &ModelWeights,
        file: &ModelFile,
        prepare: bool,
    ) -> Result<Option<ModelWeights>> {
        match self.kind {
            BackendKind::Cpu if prepare => weights.prepare_for_linear(self.ctx(), |original| {
                if let Ok(bytes) = original.storage().host_bytes() {
                    // The original's own bytes (a matrix split from a fused one is a view
                    // of part of its storage).
                    let layout = original.layout();
                    let start = layout.offset() * layout.dtype().block_bytes();
                    if let Some(own) = bytes.get(start..layout.bytes_spanned()) {
                        file.release_pages(own);
                    }
                }
            }),
            BackendKind::Cpu | BackendKind::Reference => Ok(None),
            BackendKind::Gpu => self.upload_weights(weights).map(Some),
        }
    }

    #[cfg(feature = "gpu")]
    fn upload_weights(&self, weights: &ModelWeights) -> Result<ModelWeights> {
        let gpu = self.gpu.as_ref().ok_or_else(no_gpu)?;
        crate::engine::device_weights::upload(gpu, weights)
    }

    #[cfg(not(feature = "gpu"))]
    fn upload_weights(&self, _weights: &ModelWeights) -> Result<ModelWeights> {
        Err(no_gpu())
    }

    /// Runs `step` with an output plan over the step arena, or over the pool when
    /// another thread holds the arena (counted in [`Self::busy_steps`]).
    pub(crate) fn run<T>(&self, step: impl FnOnce(&mut Outputs<'_>) -> Result<T>) -> Result<T> {
        match self.arena.try_lock() {
            Ok(mut arena) => step(&mut Outputs::arena(&self.autograd, &mut arena)),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                let mut arena = poisoned.into_inner();
                step(&mut Outputs::arena(&self.autograd, &mut arena))
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                self.busy_steps.fetch_add(1, Ordering::Relaxed);
                step(&mut Outputs::pool(&self.autograd))
            }
        }
    }

    /// The backend kind.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// The autograd handle (and through it the exec context).
    pub fn autograd(&self) -> &Autograd {
        &self.autograd
    }

    /// The exec context.
    pub fn ctx(&self) -> &ExecContext {
        self.autograd.ctx()
    }

    /// Worker threads the ops run on (1 on the reference backend and the GPU).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The step arena's rows.
    pub fn arena_capacity(&self) -> ArenaCapacity {
        self.capacity
    }

    /// Bytes the step arena holds.
    pub fn arena_bytes(&self) -> usize {
        self.lock_arena().bytes()
    }

    /// What the step arena did so far.
    pub fn arena_stats(&self) -> ArenaStats {
        self.lock_arena().stats()
    }

    /// Steps that ran with pool outputs because another thread held the arena.
    pub fn busy_steps(&self) -> u64 {
        self.busy_steps.load(Ordering::Relaxed)
    }

    fn lock_arena(&self) -> std::sync::MutexGuard<'_, StepArena> {
        self.arena.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The GPU adapter (name, API, type, driver) of a [`BackendKind::Gpu`] executor.
    pub fn gpu_adapter(&self) -> Option<String> {
        #[cfg(feature = "gpu")]
        if let Some(gpu) = &self.gpu {
            return Some(gpu.adapter().to_string());
        }
        None
    }

    /// The GPU backend of a [`BackendKind::Gpu`] executor (its pools, live buffers and
    /// host fallback counts).
    #[cfg(feature = "gpu")]
    pub fn gpu_backend(&self) -> Option<&tempra_backend_gpu::GpuBackend> {
        self.gpu.as_ref()
    }
}

/// Opens the GPU backend: its exec context and handle.
#[cfg(feature = "gpu")]
fn open_gpu() -> Result<(ExecContext, GpuHandle)> {
    let gpu = tempra_backend_gpu::GpuBackend::new()?;
    Ok((gpu.exec_context(), Some(gpu)))
}

/// Without the `gpu` feature: an error saying so.
#[cfg(not(feature = "gpu"))]
fn open_gpu() -> Result<(ExecContext, GpuHandle)> {
    Err(no_gpu())
}

/// The error for a GPU request this build or executor cannot serve.
fn no_gpu() -> LlmError {
    LlmError::Argument {
        what: "this build of tempra-llm has no GPU engine (build with the `gpu` cargo feature)"
            .into(),
    }
}
