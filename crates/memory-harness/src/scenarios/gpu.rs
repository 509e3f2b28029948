//! GPU: facade ops on the device pool, then a trim, leave as many live device buffers as
//! there were before the session, across repeated sessions. Without an adapter the check
//! is skipped with the reason (a failure when `REQUIRE_GPU=1`, as in CI).

use anyhow::Result;
use tempra_backend_gpu::{GpuBackend, GpuError};
use tempra_tensor::{DType, ExecContext};

use crate::check::{Check, Limit, Unit};

/// Sessions run, each followed by a trim.
const SESSIONS: usize = 3;

/// Whether the environment demands a GPU (`REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// One session of facade ops: projections, norms, softmax, read-backs; every tensor
/// drops before this returns.
fn session(ctx: &ExecContext, gpu: &GpuBackend) -> Result<()> {
    let x = ctx.randn(&[32, 256], DType::F32, 0.0, 1.0, 3)?;
    let w = ctx.randn(&[256, 512], DType::F32, 0.0, 0.05, 4)?;
    let g = ctx.full(&[512], DType::F32, 1.0)?;
    for _ in 0..4 {
        let h = ctx.matmul(&x, &w)?;
        let n = ctx.rms_norm(&h, &g, 1e-6)?;
        let p = ctx.softmax(&n)?;
        let s = ctx.add(&p, &n)?;
        let host = gpu.to_host(&s)?;
        anyhow::ensure!(
            host.dims() == [32, 512],
            "unexpected shape {:?}",
            host.dims()
        );
    }
    Ok(())
}

/// Runs the scenario and appends its checks to `out`.
pub fn run(out: &mut Vec<Check>) -> Result<()> {
    let name = "gpu.device_pool.live_buffers_after_trim";
    let gpu = match GpuBackend::new() {
        Ok(gpu) => gpu,
        Err(e @ GpuError::NoAdapter { .. }) => {
            out.push(Check::skipped(
                name,
                gpu_required(),
                format!("skipped: no adapter ({e})"),
            ));
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let ctx = gpu.exec_context();
    let before = gpu.live_buffers();
    let mut worst = 0i64;
    let mut trimmed = 0usize;
    for _ in 0..SESSIONS {
        session(&ctx, &gpu)?;
        trimmed += gpu.trim()?;
        let diff = gpu.live_buffers() as i64 - before as i64;
        if diff.abs() > worst.abs() {
            worst = diff;
        }
    }
    let stats = gpu.pool().stats();
    out.push(
        Check::new(name, worst as f64, Unit::Count, Limit::Within(0.0)).with_note(format!(
            "adapter {}; {before} buffers before, worst difference after each of {SESSIONS} sessions + trim; {trimmed} B trimmed",
            gpu.adapter().name
        )),
    );
    out.push(Check::new(
        "gpu.device_pool.outstanding",
        stats.outstanding as f64,
        Unit::Count,
        Limit::AtMost(0.0),
    ));
    Ok(())
}
