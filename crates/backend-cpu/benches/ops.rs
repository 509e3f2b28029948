//! The non-product ops at LLM shapes, through the facade, on 1 thread and on all threads:
//! rms_norm, softmax and rope on 2048-wide rows (1 and 512 rows), silu and add, and
//! attention of 1 and 512 queries over 2048 cached f16 keys (32 query heads, 4 KV heads,
//! head dim 64).
//!
//! `cargo bench -p tempra-backend-cpu --bench ops` (`TEMPRA_CPU_ISA=avx2|scalar` to pin
//! the kernels).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group};
use tempra_backend_cpu::{CpuBackend, workers};
use tempra_tensor::tempra_pool::HostPool;
use tempra_tensor::{AttentionParams, DType, ExecContext, RopeConfig, RopeStyle, Tensor};

const WIDTH: usize = 2048;
const HEADS: usize = 32;
const KV_HEADS: usize = 4;
const HEAD_DIM: usize = 64;
const CACHE: usize = 2048;

/// A context per thread count: 1 and every physical core.
fn contexts() -> Vec<(usize, ExecContext)> {
    let all = workers::default_threads();
    let mut counts = vec![1];
    if all > 1 {
        counts.push(all);
    }
    counts
        .into_iter()
        .map(|n| {
            (
                n,
                ExecContext::new(Arc::new(CpuBackend::with_threads(HostPool::host(), n))),
            )
        })
        .collect()
}

fn randn(ctx: &ExecContext, dims: &[usize], dtype: DType, seed: u64) -> Tensor {
    ctx.randn(dims, dtype, 0.0, 1.0, seed).unwrap()
}

fn rows_ops(c: &mut Criterion) {
    for (threads, ctx) in contexts() {
        for rows in [1, 512] {
            let mut g = c.benchmark_group(format!("rows{rows}/t{threads}"));
            g.throughput(Throughput::Bytes((rows * WIDTH * 4 * 2) as u64)); // read + write
            let x = randn(&ctx, &[rows, WIDTH], DType::F32, 1);
            let w = randn(&ctx, &[WIDTH], DType::F32, 2);
            g.bench_function("rms_norm", |b| {
                b.iter(|| black_box(ctx.rms_norm(&x, &w, 1e-5).unwrap()))
            });
            g.bench_function("softmax", |b| {
                b.iter(|| black_box(ctx.softmax(&x).unwrap()))
            });
            g.bench_function("silu", |b| b.iter(|| black_box(ctx.silu(&x).unwrap())));
            g.bench_function("add", |b| b.iter(|| black_box(ctx.add(&x, &x).unwrap())));
            let xr = x.reshape(&[rows, HEADS, HEAD_DIM]).unwrap();
            let pos: Vec<u32> = (0..rows as u32).map(|i| 1000 + i).collect();
            let pos = ctx.from_slice(&pos, &[rows]).unwrap();
            for style in [RopeStyle::Neox, RopeStyle::Interleaved] {
                let config = RopeConfig::new(HEAD_DIM, 10_000.0, style);
                let name = format!(
                    "rope_{}",
                    if style == RopeStyle::Neox {
                        "neox"
                    } else {
                        "interleaved"
                    }
                );
                g.bench_function(name, |b| {
                    b.iter(|| black_box(ctx.rope(&xr, &pos, &config, None).unwrap()))
                });
            }
            g.finish();
        }
    }
}

fn attention(c: &mut Criterion) {
    for (threads, ctx) in contexts() {
        // A session cache [max_len, kv_heads, head_dim] in f16, read as a narrow of its
        // first CACHE rows.
        let k_cache = randn(&ctx, &[CACHE + 64, KV_HEADS, HEAD_DIM], DType::F16, 3);
        let v_cache = randn(&ctx, &[CACHE + 64, KV_HEADS, HEAD_DIM], DType::F16, 4);
        let (k, v) = (
            k_cache.narrow(0, 0, CACHE).unwrap(),
            v_cache.narrow(0, 0, CACHE).unwrap(),
        );
        let mut g = c.benchmark_group(format!("attention/t{threads}"));
        g.sample_size(20);
        for tq in [1, 512] {
            let q = randn(&ctx, &[tq, HEADS, HEAD_DIM], DType::F32, 5);
            let params = AttentionParams::causal(HEAD_DIM, CACHE - tq);
            // 2 FLOPs per multiply-add, QK and PV, over the visible keys.
            let keys: usize = (0..tq).map(|i| CACHE - tq + i + 1).sum();
            g.throughput(Throughput::Elements((keys * HEADS * HEAD_DIM * 4) as u64));
            g.bench_function(format!("q{tq}_kv{CACHE}_f16"), |b| {
                b.iter(|| black_box(ctx.attention(&q, &k, &v, &params).unwrap()))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, rows_ops, attention);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_fastest_samples();
}

/// Prints, per benchmark of this file, the fastest sample's time per iteration next to the
/// median sample's. On a machine shared with other work (ours runs concurrent builds)
/// the median is inflated by preemption; the fastest sample is the better estimate of
/// the uncontended cost, and the one the crate README quotes.
fn print_fastest_samples() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion");
    let groups = ["rows1_t", "rows512_t", "attention_t"];
    let Ok(dirs) = std::fs::read_dir(&root) else {
        return;
    };
    let mut lines = Vec::new();
    for group in dirs.flatten().filter(|d| {
        groups
            .iter()
            .any(|g| d.file_name().to_string_lossy().starts_with(g))
    }) {
        for bench in std::fs::read_dir(group.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let Ok(json) = std::fs::read_to_string(bench.path().join("new/sample.json")) else {
                continue;
            };
            let (Some(iters), Some(times)) =
                (json_array(&json, "iters"), json_array(&json, "times"))
            else {
                continue;
            };
            let mut per: Vec<f64> = times.iter().zip(&iters).map(|(t, i)| t / i).collect();
            per.sort_by(f64::total_cmp);
            if let (Some(&min), Some(&median)) = (per.first(), per.get(per.len() / 2)) {
                let name = format!(
                    "{}/{}",
                    group.file_name().to_string_lossy(),
                    bench.file_name().to_string_lossy()
                );
                lines.push(format!(
                    "{name:<40} fastest {:>12} median {:>12}",
                    fmt_ns(min),
                    fmt_ns(median)
                ));
            }
        }
    }
    lines.sort();
    println!("\nper-iteration time, fastest and median sample:");
    lines.iter().for_each(|l| println!("{l}"));
}

/// The numbers of the JSON array `"key": [..]` in `json` (criterion's sample.json).
fn json_array(json: &str, key: &str) -> Option<Vec<f64>> {
    let start = json.find(&format!("\"{key}\":["))? + key.len() + 4;
    let end = start + json[start..].find(']')?;
    json[start..end]
        .split(',')
        .map(|v| v.trim().parse().ok())
        .collect()
}

fn fmt_ns(ns: f64) -> String {
    match ns {
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}
