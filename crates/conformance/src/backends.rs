//! The contexts the suite runs on, each with a label for its report.

use std::sync::Arc;

use tempra_backend_cpu::{CpuBackend, CpuConfig, Isa};
use tempra_tensor::ExecContext;
use tempra_tensor::tempra_pool::HostPool;

use crate::error::{ConformanceError, Result};

/// A context under test and the label its report carries.
#[derive(Clone, Debug)]
pub struct Target {
    /// `reference`, `cpu-avx2-3t`, `wgpu: <adapter>`.
    pub label: String,
    /// The context.
    pub ctx: ExecContext,
}

/// The reference backend.
pub fn reference() -> Target {
    Target {
        label: "reference".into(),
        ctx: ExecContext::reference(),
    }
}

/// The CPU backend on `isa` (the detected one when `None`) with `threads` workers.
pub fn cpu(isa: Option<Isa>, threads: usize) -> Result<Target> {
    let config = CpuConfig {
        isa,
        threads: Some(threads),
        ..CpuConfig::default()
    };
    let backend = CpuBackend::with_config(HostPool::host(), config).map_err(|e| {
        ConformanceError::Backend {
            backend: "cpu".into(),
            reason: e.to_string(),
        }
    })?;
    Ok(Target {
        label: format!("cpu-{}-{threads}t", backend.isa()),
        ctx: ExecContext::new(Arc::new(backend)),
    })
}

/// The CPU backend on every ISA this CPU runs (the scalar kernels always), each with
/// every thread count of `threads`.
pub fn cpus(threads: &[usize]) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    for isa in Isa::available() {
        for &t in threads {
            out.push(cpu(Some(isa), t)?);
        }
    }
    Ok(out)
}

/// The wgpu backend on the adapter `GpuOptions::from_env` picks (the label names the
/// adapter).
#[cfg(feature = "gpu")]
pub fn gpu() -> Result<Target> {
    use tempra_backend_gpu::{GpuBackend, GpuOptions};
    let gpu = GpuBackend::with_options(&GpuOptions::from_env()).map_err(|e| {
        ConformanceError::Backend {
            backend: "wgpu".into(),
            reason: e.to_string(),
        }
    })?;
    Ok(Target {
        label: format!("wgpu: {}", gpu.adapter().name),
        ctx: gpu.exec_context(),
    })
}
