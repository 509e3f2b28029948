//! Timing probes for tuning (ignored tests; run with
//! `cargo test --release -p tempra-backend-cpu quantized::probe -- --ignored --nocapture`;
//! `PROBE_DTYPES=f16,q4_k` limits the per-format probes to those formats).

use tempra_tensor::DType;
use tempra_tensor::quant::{quantize_row, vec_dot_dtype};

use super::kernels::{FORMATS, available_kernels};
use crate::gemm::probe::best_of;

#[test]
#[ignore]
fn dot_in_cache() {
    // The portable kernels first: the baseline each ISA's figures compare with; then
    // AVX2 (`maddubs`) and each VNNI table the CPU runs.
    for kernels in available_kernels() {
        let k = 4096;
        let rows = 64;
        for dtype in probe_formats(&FORMATS) {
            let act = vec_dot_dtype(dtype);
            let vals: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.1)
                .collect();
            let w = weight_bytes(dtype, rows, k);
            let mut a = vec![0u8; act.bytes_for(8 * k).unwrap()];
            quantize_row(act, &vals[..8 * k], &mut a).unwrap();
            let nb = k / dtype.block_len();
            let (wrow, arow) = (dtype.bytes_for(k).unwrap(), act.bytes_for(k).unwrap());
            let dot = kernels.dot(dtype).unwrap();
            for r in [1usize, 4] {
                let ptrs: Vec<*const u8> = (0..r).map(|i| a[i * arow..].as_ptr()).collect();
                let mut out = [0f32; 4];
                let reps = 200;
                let best = best_of(5, || {
                    for _ in 0..reps {
                        for j in 0..rows {
                            // SAFETY: `nb` blocks per row, kernels match this CPU.
                            unsafe { dot(nb, w[j * wrow..].as_ptr(), &ptrs, &mut out[..r]) };
                        }
                    }
                });
                let macs = (reps * rows * k * r) as f64;
                let bytes = (reps * rows * wrow) as f64;
                println!(
                    "{} {dtype} rows={r}: {:.1} GMAC/s, {:.1} GB/s of weights, {:.2} ns/block",
                    kernels.name,
                    macs / best / 1e9,
                    bytes / best / 1e9,
                    best / (reps * rows * nb) as f64 * 1e9
                );
            }
        }
    }
}

#[test]
#[ignore]
fn prefill_int8_vs_dequantized_gemm() {
    use tempra_tensor::tempra_pool::HostPool;
    use tempra_tensor::{Layout, Shape, Storage, Tensor};

    use crate::CpuBackend;

    let backend = CpuBackend::with_threads(HostPool::host(), 1);
    let (m, k, n) = (512usize, 2048usize, 2048usize);
    let x = Tensor::owned_from_slice(
        &(0..m * k)
            .map(|i| ((i * 31) % 17) as f32 / 9.0 - 0.9)
            .collect::<Vec<_>>(),
        &[m, k],
    )
    .unwrap();
    for dtype in probe_formats(&[DType::Q4_0, DType::Q8_0, DType::Q4K, DType::Q5K, DType::Q6K]) {
        let bytes = weight_bytes(dtype, n, k);
        let mut storage = Storage::owned_zeroed(bytes.len()).unwrap();
        storage.host_bytes_mut().unwrap()[..bytes.len()].copy_from_slice(&bytes);
        let w = Tensor::from_storage(
            storage,
            Layout::contiguous(Shape::new(&[n, k]).unwrap(), dtype).unwrap(),
        )
        .unwrap();
        let prepared = crate::prepare::prepare_weight(&backend.products(), &w).unwrap();
        for (label, rows, interleaved) in [
            ("int8 dots", usize::MAX, false),
            ("dequant+gemm", 1, false),
            ("interleaved (int8 at every row count)", usize::MAX, true),
        ] {
            let w = match (&prepared, interleaved) {
                (Some(p), true) => p,
                (None, true) => continue,
                _ => &w,
            };
            let mut products = backend.products();
            products.dequant_gemm_rows = rows;
            let mut out = Tensor::owned_zeros(&[m, n], DType::F32).unwrap();
            let best = best_of(3, || {
                crate::linear::linear(&products, &x, w, None, &mut out).unwrap();
            });
            println!(
                "{dtype} m={m} {label}: {:.1} GFLOP/s",
                2.0 * (m * n * k) as f64 / best / 1e9
            );
        }
    }
}

#[test]
#[ignore]
fn decode_gemv_out_of_cache() {
    use tempra_tensor::tempra_pool::HostPool;
    use tempra_tensor::{Layout, Shape, Storage, Tensor};

    use crate::CpuBackend;

    let threads: usize = std::env::var("PROBE_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let backend = CpuBackend::with_threads(HostPool::host(), threads);
    // `PROBE_N=256 PROBE_MATS=1` keeps the weights in cache (the kernels' compute bound).
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    // `PROBE_ROWS=8`: activation rows per product (a mixed step's prompt chunk).
    let (k, n, m) = (2048usize, env("PROBE_N", 5632), env("PROBE_ROWS", 1));
    let x = Tensor::owned_from_slice(
        &(0..m * k)
            .map(|i| ((i * 31) % 17) as f32 / 9.0 - 0.9)
            .collect::<Vec<_>>(),
        &[m, k],
    )
    .unwrap();
    for dtype in probe_formats(&[
        DType::F16,
        DType::BF16,
        DType::Q4_0,
        DType::Q5_0,
        DType::Q8_0,
        DType::Q2K,
        DType::Q3K,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        DType::IQ4NL,
        DType::MXFP4,
    ]) {
        let bytes = weight_bytes(dtype, n, k);
        // Several copies so the weights stream from memory, as in decode: three times the
        // last-level cache by default (a fixed 12 stayed partly in a 260 MB L3), as
        // bench-facade sizes its decode rows.
        let llc = crate::memory_bandwidth::last_level_cache_bytes();
        let mats = env("PROBE_MATS", (3 * llc).div_ceil(bytes.len()).clamp(12, 64));
        let ws: Vec<Tensor> = (0..mats)
            .map(|_| {
                let mut storage = Storage::owned_zeroed(bytes.len()).unwrap();
                storage.host_bytes_mut().unwrap()[..bytes.len()].copy_from_slice(&bytes);
                Tensor::from_storage(
                    storage,
                    Layout::contiguous(Shape::new(&[n, k]).unwrap(), dtype).unwrap(),
                )
                .unwrap()
            })
            .collect();
        let prepared: Vec<Tensor> = ws
            .iter()
            .map(|w| {
                crate::prepare::prepare_weight(&backend.products(), w)
                    .unwrap()
                    .unwrap_or_else(|| w.clone())
            })
            .collect();
        let mut out = Tensor::owned_zeros(&[m, n], DType::F32).unwrap();
        let mut line = format!("{dtype} {m} row(s) {n}x{k} x{mats}, {threads} thread(s):");
        for round in 0..2 {
            for (label, weights) in [("row-major", &ws), ("interleaved", &prepared)] {
                let products = backend.products();
                let best = best_of(5, || {
                    for w in weights {
                        crate::linear::linear(&products, &x, w, None, &mut out).unwrap();
                    }
                });
                if round == 1 {
                    let gbs = (bytes.len() * mats) as f64 / best / 1e9;
                    let us = best / mats as f64 * 1e6;
                    line += &format!(" {label} {gbs:.1} GB/s ({us:.0} µs);");
                }
            }
        }
        println!("{line}");
    }
}

#[test]
#[ignore]
fn interleaved_in_cache() {
    use super::kernels::ActRow;
    use crate::interleaved::{InterleavedLayout, interleave_rows};

    // 2048-long rows, 32 groups of eight (≈ 300 KiB of weights: in L2 on Zen 3), so the
    // figures are the kernels' compute bound, without `linear`'s per-call work.
    let (k, groups) = (2048usize, 32usize);
    // Every table this CPU runs but the portable one (AVX2, then its VNNI variants).
    for kernels in super::kernels::available_kernels().into_iter().skip(1) {
        for layout in InterleavedLayout::ALL {
            let base = layout.format();
            let act = vec_dot_dtype(base);
            let vals: Vec<f32> = (0..8 * groups * k)
                .map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.1)
                .collect();
            let mut plain = vec![0u8; base.bytes_for(vals.len()).unwrap()];
            quantize_row(base, &vals, &mut plain).unwrap();
            let group_bytes = layout.bytes_for(8, k).unwrap();
            let mut w = vec![0u8; group_bytes * groups];
            let plain_group = base.bytes_for(8 * k).unwrap();
            for g in 0..groups {
                interleave_rows(
                    layout,
                    8,
                    k,
                    &plain[g * plain_group..][..plain_group],
                    &mut w[g * group_bytes..][..group_bytes],
                )
                .unwrap();
            }
            let mut a = vec![0u8; act.bytes_for(8 * k).unwrap()];
            quantize_row(act, &vals[..8 * k], &mut a).unwrap();
            let arow = act.bytes_for(k).unwrap();
            let nb = k / base.block_len();
            // Q8_0 rows carry per-block scales and sums; Q8_K blocks hold their own (the
            // kernels do not read these then).
            let (mut scales, mut sums) = (vec![0f32; 8 * nb], vec![0i32; 8 * nb]);
            if act == DType::Q8_0 {
                super::q8_0_block_stats(&a, &mut scales, &mut sums);
            }
            let acts: Vec<ActRow> = (0..8)
                .map(|r| ActRow {
                    blocks: a[r * arow..].as_ptr(),
                    scales: scales[r * nb..].as_ptr(),
                    sums: sums[r * nb..].as_ptr(),
                })
                .collect();
            let gemm = kernels.gemm_r8(layout);
            for r in [1usize, 4, 8] {
                if r > gemm.rows {
                    continue;
                }
                let mut out = [[0f32; 8]; 8];
                let reps = 300;
                let best = best_of(7, || {
                    for _ in 0..reps {
                        for g in 0..groups {
                            // SAFETY: `nb` records per group, `r` activation rows of `nb`
                            // blocks of the partner format (with scales and sums, read for
                            // Q8_0 only); the table matches this CPU.
                            unsafe {
                                (gemm.product)(
                                    nb,
                                    w[g * group_bytes..].as_ptr(),
                                    &acts[..r],
                                    &mut out[..r],
                                )
                            };
                        }
                    }
                });
                println!(
                    "{} {layout} rows={r}: {:.1} GB/s of weights, {:.1} ns per record",
                    kernels.name,
                    (reps * w.len()) as f64 / best / 1e9,
                    best / (reps * groups * nb) as f64 * 1e9
                );
            }
        }
    }
}

/// `formats`, or those of them named in `PROBE_DTYPES` (e.g. `f16,q4_k`).
fn probe_formats(formats: &[DType]) -> Vec<DType> {
    let picked = std::env::var("PROBE_DTYPES")
        .unwrap_or_default()
        .to_lowercase();
    formats
        .iter()
        .copied()
        .filter(|d| {
            picked.is_empty() || picked.split(',').any(|p| p == d.to_string().to_lowercase())
        })
        .collect()
}

/// The bytes of an `n × k` weight of deterministic values in `dtype` (F16, BF16, a block
/// format quantized by the reference, or seeded random blocks of a format without a
/// quantizer).
fn weight_bytes(dtype: DType, n: usize, k: usize) -> Vec<u8> {
    let vals: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.1)
        .collect();
    if dtype == DType::F16 {
        let halves: Vec<half::f16> = vals.iter().map(|&v| half::f16::from_f32(v)).collect();
        return bytemuck::cast_slice::<half::f16, u8>(&halves).to_vec();
    }
    if dtype == DType::BF16 {
        let halves: Vec<half::bf16> = vals.iter().map(|&v| half::bf16::from_f32(v)).collect();
        return bytemuck::cast_slice::<half::bf16, u8>(&halves).to_vec();
    }
    if !tempra_tensor::quant::has_quantizer(dtype) {
        return tempra_tensor::quant::random_blocks(dtype, n * k / dtype.block_len(), 1.0, 7)
            .unwrap();
    }
    let mut bytes = vec![0u8; dtype.bytes_for(n * k).unwrap()];
    quantize_row(dtype, &vals, &mut bytes).unwrap();
    bytes
}
