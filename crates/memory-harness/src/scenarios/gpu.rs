//! GPU: facade ops on the device pool, then a trim, leave as many live device buffers as
//! there were before the session, across repeated sessions. The GPU engine keeps its
//! live device-buffer count flat over 100 decode steps, and when its session and model
//! (executor, weights, step arena) drop, a trim leaves the device with the buffers a
//! fresh one starts with. Without an adapter the checks are skipped with the reason (a
//! failure when `REQUIRE_GPU=1`, as in CI).

use std::sync::Arc;

use anyhow::{Context, Result};
use tempra_backend_gpu::{GpuBackend, GpuError};
use tempra_llm::engine::{BackendKind, LoadOptions, Model, logits_slice};
use tempra_tensor::{DType, ExecContext};

use crate::check::{Check, Limit, Unit};
use crate::models::ModelSource;

/// Decode steps over which the engine's live device-buffer count must stay flat.
pub const ENGINE_DECODE_STEPS: usize = 100;

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

/// The index of the largest logit.
fn argmax(row: &[f32]) -> u32 {
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &v) in row.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0 as u32
}

/// The GPU engine on `model`: live device buffers over [`ENGINE_DECODE_STEPS`] decode
/// steps (after a prompt and warm-up), and after the session and model drop.
fn engine(model: &ModelSource, out: &mut Vec<Check>) -> Result<()> {
    // What a device holds when nothing has run on it.
    let start = GpuBackend::new()?.live_buffers();
    let options = LoadOptions {
        tokenizer: model.tokenizer.clone(),
        backend: BackendKind::Gpu,
        context_length: Some(256),
        ..LoadOptions::default()
    };
    let loaded: Arc<Model> = Model::load(&model.path, &options)
        .with_context(|| format!("loading {} on the GPU", model.path.display()))?;
    let gpu = loaded
        .executor()
        .gpu_backend()
        .context("a GPU model without a GPU backend")?
        .clone();
    let vocab = loaded.config().vocab_size as u32;
    let mut session = loaded.session()?;
    let prompt: Vec<u32> = (0..16u32).map(|i| (i * 37 + 5) % vocab).collect();
    let mut token = argmax(logits_slice(&session.prefill(&prompt)?)?);
    for _ in 0..4 {
        token = argmax(logits_slice(&session.step(token)?)?);
    }
    gpu.synchronize()?;
    let warm = gpu.live_buffers();
    let (mut low, mut high) = (warm, warm);
    for _ in 0..ENGINE_DECODE_STEPS {
        token = argmax(logits_slice(&session.step(token)?)?);
        gpu.synchronize()?;
        let live = gpu.live_buffers();
        low = low.min(live);
        high = high.max(live);
    }
    out.push(
        Check::new(
            format!("gpu.engine.{}.live_buffers_decode_range", model.name),
            (high - low) as f64,
            Unit::Count,
            Limit::Within(0.0),
        )
        .with_note(format!(
            "adapter {}; {warm} device buffers after warm-up, range over {ENGINE_DECODE_STEPS} decode steps",
            gpu.adapter().name
        )),
    );
    drop(session);
    drop(loaded);
    gpu.trim()?;
    let after = gpu.live_buffers();
    out.push(
        Check::new(
            format!("gpu.engine.{}.live_buffers_after_drop", model.name),
            after as f64 - start as f64,
            Unit::Count,
            Limit::Within(0.0),
        )
        .with_note(format!(
            "{after} device buffers after the session and model drop and a trim; a fresh device has {start}"
        )),
    );
    Ok(())
}

/// Runs the scenario on the facade and, with `model`, on the GPU engine; appends its
/// checks to `out`.
pub fn run(model: &ModelSource, out: &mut Vec<Check>) -> Result<()> {
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
    drop(ctx);
    drop(gpu);
    engine(model, out)
}
