//! `cargo xtask bench-facade --backend gpu`: the facade suite on the GPU backend.
//!
//! The same cases and table as the CPU run, with inputs and weights uploaded to the device
//! once (outside the timing) and each timed call followed by a wait for the GPU. Percent
//! of peak is against the adapter's published figures when the adapter is in
//! [`ADAPTER_PEAKS`] (memory bandwidth for memory-bound rows, dense f32 throughput for
//! compute-bound rows), else "-" (software adapters such as lavapipe have none).

use anyhow::{Context, Result};
use serde_json::json;
use tempra_backend_gpu::GpuBackend;
use tempra_tensor::Tensor;

use crate::bench_facade::{Bound, Options, Row, Suite, compare, print_table};

/// Published figures: (name substring, memory bandwidth GB/s, dense f32 GFLOP/s).
const ADAPTER_PEAKS: &[(&str, f64, f64)] = &[
    ("H200", 4800.0, 67_000.0),
    ("H100 PCIe", 2000.0, 51_000.0),
    ("H100", 3350.0, 67_000.0),
    ("A100", 2039.0, 19_500.0),
    ("L40S", 864.0, 91_600.0),
    ("RTX 4090", 1008.0, 82_600.0),
    ("RTX 3090", 936.0, 35_600.0),
    ("Apple M2 Max", 400.0, 13_600.0),
    ("Apple M3 Max", 400.0, 16_400.0),
];

/// The last-level cache assumed when sizing decode weight copies (GPU L2 caches reach
/// 50-60 MiB).
const GPU_CACHE_BYTES: usize = 64 << 20;

/// Runs the suite on the GPU adapter `GpuBackend::new` selects (`TEMPRA_GPU_ADAPTER`).
pub(crate) fn run(o: &Options) -> Result<()> {
    let gpu = GpuBackend::new().context("--backend gpu needs a GPU adapter")?;
    let adapter = gpu.adapter().clone();
    println!("adapter: {adapter} (f16 arithmetic: {})", gpu.has_f16());
    let contexts = vec![(1, gpu.exec_context())];
    let place = |t: Tensor| -> Result<Tensor> { Ok(gpu.upload_weight(&t)?) };
    let sync = || -> Result<()> { Ok(gpu.synchronize()?) };
    let mut suite = Suite {
        o,
        contexts: &contexts,
        rows: Vec::new(),
        llc: GPU_CACHE_BYTES,
        place: &place,
        sync: &sync,
    };
    suite.run_all()?;
    let mut rows: Vec<Row> = suite.rows;
    let peaks = ADAPTER_PEAKS
        .iter()
        .find(|(name, _, _)| adapter.name.contains(name))
        .map(|&(_, bw, flops)| (bw, flops));
    for r in &mut rows {
        r.pct_of_peak = match (peaks, r.bound) {
            (Some((bw, _)), Bound::Memory) => 100.0 * r.gbs.unwrap_or(0.0) / bw,
            (Some((_, flops)), Bound::Compute) => 100.0 * r.gflops.unwrap_or(0.0) / flops,
            (None, _) => f64::NAN,
        };
    }
    print_table(&rows);
    let json = json!({
        "adapter": {
            "name": adapter.name,
            "backend": adapter.backend,
            "device_type": adapter.device_type,
            "driver": adapter.driver,
            "f16": gpu.has_f16(),
            "mem_bw_gbs": peaks.map(|p| p.0),
            "f32_gflops": peaks.map(|p| p.1),
        },
        "results": rows.iter().map(|r| json!({
            "op": r.op,
            "shape": r.shape,
            "dtype": r.dtype,
            "threads": r.threads,
            "median_ns": r.median_ns,
            "gflops": r.gflops,
            "gbs": r.gbs,
            "pct_of_peak": r.pct_of_peak.is_finite().then_some(r.pct_of_peak),
        })).collect::<Vec<_>>(),
    });
    if let Some(dir) = o.out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&o.out, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", o.out.display()))?;
    println!("wrote {}", o.out.display());
    if let Some(baseline) = &o.baseline {
        compare(baseline, &rows, o.threshold_pct)?;
    }
    Ok(())
}
