//! Shared test helpers: the backend (or a skip), the reference context, comparisons.

use std::sync::OnceLock;

use tempra_backend_gpu::{GpuBackend, GpuOptions};
use tempra_tensor::{DType, ExecContext, Tensor};

/// Whether CI demands a GPU (`REQUIRE_GPU=1`).
pub(crate) fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// A backend made with `options`, or `None` (with the reason printed) when there is no
/// adapter; panics instead when `REQUIRE_GPU=1`.
pub(crate) fn backend_with(options: &GpuOptions, test: &str) -> Option<GpuBackend> {
    match GpuBackend::with_options(options) {
        Ok(gpu) => Some(gpu),
        Err(e) if gpu_required() => panic!("REQUIRE_GPU=1 but {test} has no GPU: {e}"),
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            None
        }
    }
}

/// The backend shared by the op tests (one device for the whole binary).
pub(crate) fn shared(test: &str) -> Option<&'static GpuBackend> {
    static SHARED: OnceLock<Option<GpuBackend>> = OnceLock::new();
    let gpu = SHARED.get_or_init(|| backend_with(&GpuOptions::from_env(), "the GPU tests"));
    if gpu.is_none() {
        if gpu_required() {
            panic!("REQUIRE_GPU=1 but {test} has no GPU");
        }
        eprintln!("skipping {test}: no GPU adapter");
    }
    gpu.as_ref()
}

/// `let (gpu, g, r) = setup!("name");`: the shared backend, a context on it and a
/// reference context; returns from the test when there is no GPU.
#[macro_export]
macro_rules! setup {
    ($name:expr) => {{
        let Some(gpu) = $crate::common::shared($name) else {
            return Ok(());
        };
        (
            gpu,
            gpu.exec_context(),
            tempra_tensor::ExecContext::reference(),
        )
    }};
}

/// Like [`setup!`], with a backend of its own (for tests that count host fallbacks or
/// pool traffic, which other tests would disturb on the shared one).
#[macro_export]
macro_rules! setup_own {
    ($name:expr) => {{
        let Some(gpu) =
            $crate::common::backend_with(&tempra_backend_gpu::GpuOptions::from_env(), $name)
        else {
            return Ok(());
        };
        let g = gpu.exec_context();
        (gpu, g, tempra_tensor::ExecContext::reference())
    }};
}

/// Uniform values in `[low, high)` on both contexts (the same values: seeded generation
/// is identical on every backend).
pub(crate) fn rand_pair(
    g: &ExecContext,
    r: &ExecContext,
    dims: &[usize],
    low: f64,
    high: f64,
    seed: u64,
) -> anyhow::Result<(Tensor, Tensor)> {
    Ok((
        g.rand(dims, DType::F32, low, high, seed)?,
        r.rand(dims, DType::F32, low, high, seed)?,
    ))
}

/// Normal values on both contexts, in `dtype`.
pub(crate) fn randn_pair(
    g: &ExecContext,
    r: &ExecContext,
    dims: &[usize],
    dtype: DType,
    seed: u64,
) -> anyhow::Result<(Tensor, Tensor)> {
    Ok((
        g.randn(dims, dtype, 0.0, 1.0, seed)?,
        r.randn(dims, dtype, 0.0, 1.0, seed)?,
    ))
}

/// The same bytes (any dtype, including block formats) on both contexts.
pub(crate) fn bytes_pair(
    g: &ExecContext,
    r: &ExecContext,
    host: &Tensor,
) -> anyhow::Result<(Tensor, Tensor)> {
    let bytes = host.storage().host_bytes()?[..host.layout().bytes_spanned()].to_vec();
    Ok((
        g.from_bytes(&bytes, host.dims(), host.dtype())?,
        r.from_bytes(&bytes, host.dims(), host.dtype())?,
    ))
}

/// The NMSE of `gpu` against `reference` ([`tempra_tensor::compare::nmse`], the one
/// error metric); NaNs and infinities must sit at the same positions.
pub(crate) fn normalized_error(gpu: &Tensor, reference: &Tensor) -> anyhow::Result<f64> {
    Ok(tempra_tensor::compare::nmse(gpu, reference)?)
}

/// Asserts the NMSE is within the budget `tol`, naming `what`.
pub(crate) fn assert_close(
    gpu: &Tensor,
    reference: &Tensor,
    tol: f64,
    what: &str,
) -> anyhow::Result<()> {
    let err = normalized_error(gpu, reference).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    anyhow::ensure!(err <= tol, "{what}: nmse {err:.3e} > {tol:.1e}");
    Ok(())
}

/// Budgets (NMSE) per kind of computation.
pub(crate) mod tol {
    /// f32 elementwise arithmetic and exact conversions.
    pub(crate) const EXACT_F32: f64 = 1e-12;
    /// f32 transcendental functions (exp, tanh, erf, ...).
    pub(crate) const TRANSCENDENTAL: f64 = 1e-10;
    /// f32 sums and dot products (reductions, matmul, linear, norms, attention).
    pub(crate) const SUM_F32: f64 = 1e-10;
    /// Dequantization with f16 scale products (`SHADER_F16` devices).
    pub(crate) const F16_DEQUANT: f64 = 2e-5;
}
