//! Timing probes for tuning (ignored tests; run with
//! `cargo test --release -p tempra-backend-cpu gemm::probe -- --ignored --nocapture`;
//! `PROBE_N` sets the blocking sweep's size).

use std::time::Instant;

use super::*;
use half::f16;

use crate::parallel::Serial;

/// The fastest of `reps` timings of `f`, in seconds (every timing probe's loop).
pub(crate) fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore]
fn micro_kernel_in_cache() {
    let k = best_kernel();
    let kc = 256;
    // Panels as the packing scratch has them: 64-byte aligned (a misaligned panel splits
    // every other 32-byte load across cache lines).
    let aligned = |v: &[f32]| v.as_ptr().align_offset(64);
    let a_buf = vec![0.5f32; k.mr * kc + 16];
    let b_buf = vec![0.25f32; k.nr * kc + 16];
    let mut c = vec![0f32; k.mr * k.nr];
    let (a, b) = (&a_buf[aligned(&a_buf)..], &b_buf[aligned(&b_buf)..]);
    let calls = 20_000;
    let t = best_of(5, || {
        for _ in 0..calls {
            // SAFETY: panels of `kc` steps and an mr × nr tile; the kernel matches the CPU.
            unsafe { (k.run)(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), k.nr, true) };
        }
    });
    let flops = 2.0 * (k.mr * k.nr * kc * calls) as f64;
    println!("{} micro-kernel: {:.1} GFLOP/s", k.name, flops / t / 1e9);
}

#[test]
#[ignore]
fn blocked_gemm_one_thread() {
    let pool = HostPool::host();
    for &n in &[512usize, 1024, 2048] {
        let a = vec![0.5f32; n * n];
        let b = vec![0.25f32; n * n];
        let mut c = vec![0f32; n * n];
        let g = Gemm {
            kernel: best_kernel(),
            pool: &pool,
            par: &Serial,
        };
        let (ma, mb) = (
            MatRef {
                values: Values::F32(&a),
                offset: 0,
                rs: n,
                cs: 1,
            },
            MatRef {
                values: Values::F32(&b),
                offset: 0,
                rs: n,
                cs: 1,
            },
        );
        let out = OutPtr::new(&mut c, n);
        // SAFETY: `c` is an n × n matrix held here.
        let t = best_of(3, || unsafe { g.gemm(n, n, n, ma, mb, out).unwrap() });
        println!(
            "{} gemm {n}^3: {:.1} GFLOP/s",
            g.kernel.name,
            2.0 * (n * n * n) as f64 / t / 1e9
        );
    }
}

#[test]
#[ignore]
fn blocking_sweep() {
    let pool = HostPool::host();
    let n: usize = std::env::var("PROBE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let a = vec![0.5f32; n * n];
    let b = vec![0.25f32; n * n];
    let mut c = vec![0f32; n * n];
    let (ma, mb) = (
        MatRef {
            values: Values::F32(&a),
            offset: 0,
            rs: n,
            cs: 1,
        },
        MatRef {
            values: Values::F32(&b),
            offset: 0,
            rs: n,
            cs: 1,
        },
    );
    let out = OutPtr::new(&mut c, n);
    for kc in [256, 384, 512] {
        for mc in [72, 144, 216] {
            let kernel = GemmKernel {
                kc,
                mc,
                ..best_kernel()
            };
            let g = Gemm {
                kernel,
                pool: &pool,
                par: &Serial,
            };
            // SAFETY: `c` is an n × n matrix held here.
            let t = best_of(3, || unsafe { g.gemm(n, n, n, ma, mb, out).unwrap() });
            println!(
                "kc {kc} mc {mc}: {:.1} GFLOP/s",
                2.0 * (n * n * n) as f64 / t / 1e9
            );
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_loop(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_set1_ps(0.0); 12];
    let x = std::hint::black_box(_mm256_set1_ps(0.999_999));
    let y = std::hint::black_box(_mm256_set1_ps(1e-7));
    for _ in 0..std::hint::black_box(iters) {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, x, y);
        }
    }
    let mut s = 0.0;
    for a in acc {
        let mut v = [0f32; 8];
        // SAFETY: 8 writable floats.
        unsafe { _mm256_storeu_ps(v.as_mut_ptr(), a) };
        s += v.iter().sum::<f32>();
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[test]
#[ignore]
fn fma_peak() {
    if avx2_kernel().is_none() {
        return;
    }
    let iters = 20_000_000;
    let mut sink = 0.0;
    // SAFETY: AVX2 and FMA were detected above.
    let t = best_of(3, || sink += unsafe { fma_loop(iters) });
    println!(
        "fma peak: {:.1} GFLOP/s (sink {sink})",
        2.0 * 8.0 * 12.0 * iters as f64 / t / 1e9
    );
}

/// `iters` rounds of twelve independent 512-bit `$instr zmm_acc, zmm16, zmm17` (the
/// accumulators zmm0..zmm11, so neither latency nor the register allocator limits them).
#[cfg(target_arch = "x86_64")]
macro_rules! zmm_throughput_loop {
    ($name:ident, $instr:literal) => {
        /// # Safety
        ///
        /// The CPU runs `$instr` (AVX-512).
        unsafe fn $name(iters: usize) {
            // SAFETY: register-only instructions the caller checked the CPU has; every
            // register written is declared clobbered.
            unsafe {
                std::arch::asm!(
                    "vpxord zmm16, zmm16, zmm16",
                    "vpxord zmm17, zmm17, zmm17",
                    "2:",
                    concat!($instr, " zmm0, zmm16, zmm17"),
                    concat!($instr, " zmm1, zmm16, zmm17"),
                    concat!($instr, " zmm2, zmm16, zmm17"),
                    concat!($instr, " zmm3, zmm16, zmm17"),
                    concat!($instr, " zmm4, zmm16, zmm17"),
                    concat!($instr, " zmm5, zmm16, zmm17"),
                    concat!($instr, " zmm6, zmm16, zmm17"),
                    concat!($instr, " zmm7, zmm16, zmm17"),
                    concat!($instr, " zmm8, zmm16, zmm17"),
                    concat!($instr, " zmm9, zmm16, zmm17"),
                    concat!($instr, " zmm10, zmm16, zmm17"),
                    concat!($instr, " zmm11, zmm16, zmm17"),
                    "dec {n}",
                    "jnz 2b",
                    n = inout(reg) iters.max(1) => _,
                    out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _,
                    out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _,
                    out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _,
                    out("zmm16") _, out("zmm17") _,
                    options(nomem, nostack),
                );
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
zmm_throughput_loop!(dpbf16_zmm_loop, "vdpbf16ps");
#[cfg(target_arch = "x86_64")]
zmm_throughput_loop!(fma_zmm_loop, "vfmadd231ps");

/// Whether AVX-512 BF16's `vdpbf16ps` (32 bf16 multiply-adds per 512-bit instruction,
/// pairs summed into f32 lanes) would out-run f32 FMAs (16 per instruction) for BF16
/// weights: the instructions' throughput on this CPU, in multiply-adds per second.
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore]
fn bf16_dot_vs_fma_throughput() {
    if !crate::isa::CpuFeatures::detect().avx512_bf16 {
        println!("no AVX-512 BF16 on this CPU");
        return;
    }
    let iters = 20_000_000;
    // SAFETY: AVX-512 BF16 (and so AVX-512 F) was detected above.
    let dp = best_of(3, || unsafe { dpbf16_zmm_loop(iters) });
    // SAFETY: as above.
    let fma = best_of(3, || unsafe { fma_zmm_loop(iters) });
    let rate = |t: f64, macs: f64| 12.0 * iters as f64 / t / 1e9 * macs;
    println!(
        "vdpbf16ps: {:.2} G instructions/s = {:.1} GMAC/s; vfmadd231ps: {:.2} G/s = {:.1} \
         GMAC/s (f32)",
        rate(dp, 1.0),
        rate(dp, 32.0),
        rate(fma, 1.0),
        rate(fma, 16.0)
    );
}

/// Packing a transposed f16 weight (`w [N, K]` as `B = wᵀ`) block by block as a prefill
/// GEMM does, from a matrix larger than the caches: ns per value, and the portable
/// (convert, then transpose) path beside the ISA's fused one.
#[test]
#[ignore]
fn pack_f16_weights() {
    let kern = best_kernel();
    let (n, k) = (16384usize, 2048usize);
    let w: Vec<f16> = (0..n * k)
        .map(|i| f16::from_f32((i % 251) as f32 / 64.0))
        .collect();
    let b = MatRef {
        values: Values::F16(&w),
        offset: 0,
        rs: 1,
        cs: k,
    };
    let mut dst = vec![0f32; kern.nc.div_ceil(kern.nr) * kern.nr * kern.kc];
    for (name, ops) in [("portable", PackOps::default()), (kern.name, kern.pack)] {
        let t = best_of(3, || {
            for jc in (0..n).step_by(kern.nc) {
                let nc = (n - jc).min(kern.nc);
                for pc in (0..k).step_by(kern.kc) {
                    pack_panels(ops, b.at(pc, jc), kern.nr, nc, k, kern.kc, 1, &mut dst);
                }
            }
        });
        println!("{name}: {:.3} ns per value", t * 1e9 / (n * k) as f64);
    }
}

/// Prefill-shaped products with F16 weights read from memory, as a model's prefill meets
/// them: `X [512, K] · wᵀ` for the seven projections of a 1b Llama block (q, k, v, o,
/// gate, up, down) over four blocks of distinct weights (350 MiB, more than the caches
/// hold), one thread; GFLOP/s over all 28 products, best of three. `PROBE_ROWS` sets the
/// rows of `X`.
#[test]
#[ignore]
fn prefill_f16_weights_from_memory() {
    let pool = HostPool::host();
    let m: usize = std::env::var("PROBE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    let (d, kv, ff) = (2048usize, 256usize, 5632usize);
    let block = [(d, d), (kv, d), (kv, d), (d, d), (ff, d), (ff, d), (d, ff)];
    let shapes: Vec<(usize, usize)> = (0..4).flat_map(|_| block).collect();
    let weights: Vec<Vec<f16>> = shapes
        .iter()
        .enumerate()
        .map(|(w, &(n, k))| {
            (0..n * k)
                .map(|i| f16::from_f32(((i + w) % 251) as f32 / 251.0))
                .collect()
        })
        .collect();
    let x: Vec<f32> = (0..m * ff).map(|i| (i % 61) as f32 / 61.0).collect();
    let mut c = vec![0f32; m * ff];
    let g = Gemm {
        kernel: best_kernel(),
        pool: &pool,
        par: &Serial,
    };
    let t = best_of(3, || {
        for (w, &(n, k)) in weights.iter().zip(&shapes) {
            let a = MatRef {
                values: Values::F32(&x),
                offset: 0,
                rs: k,
                cs: 1,
            };
            let b = MatRef {
                values: Values::F16(w),
                offset: 0,
                rs: 1,
                cs: k,
            };
            // SAFETY: `c` holds an m × n matrix for every shape.
            unsafe { g.gemm(m, n, k, a, b, OutPtr::new(&mut c, n)).unwrap() };
        }
    });
    let flops: usize = shapes.iter().map(|&(n, k)| 2 * m * n * k).sum();
    println!(
        "{} prefill of {m} rows, f16 weights from memory: {:.1} GFLOP/s",
        g.kernel.name,
        flops as f64 / t / 1e9
    );
}
