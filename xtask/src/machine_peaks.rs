//! The machine's peaks, measured in the same run as the benchmarks so that percentages
//! hold across machines: streaming read bandwidth and FMA throughput, per thread count.

use std::time::Instant;

use tempra_backend_cpu::memory_bandwidth;

/// Measured peaks for one thread count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peaks {
    /// Streaming read bandwidth from memory, GB/s.
    pub(crate) mem_bw_gbs: f64,
    /// f32 FMA throughput, GFLOP/s (2 FLOPs per lane per FMA).
    pub(crate) fma_gflops: f64,
}

/// Measures both peaks with `threads` threads; `quick` shortens the runs.
pub(crate) fn measure(threads: usize, quick: bool) -> Peaks {
    Peaks {
        mem_bw_gbs: read_bandwidth(threads, quick),
        fma_gflops: fma_throughput(threads, quick),
    }
}

/// Streaming read bandwidth, measured as `tempra bench` measures it (the best of 5 or 9
/// passes over a buffer 8× the last-level cache).
fn read_bandwidth(threads: usize, quick: bool) -> f64 {
    memory_bandwidth::read_bandwidth_gbs(threads, if quick { 5 } else { 9 })
}

/// FMA throughput: every thread runs independent FMA chains on the widest vectors the CPU
/// has (AVX-512, else AVX2+FMA, else scalar `mul_add`), enough chains to cover the
/// latency. Best of a few runs.
fn fma_throughput(threads: usize, quick: bool) -> f64 {
    let iters: usize = if quick { 20_000_000 } else { 50_000_000 };
    let mut best = 0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let flops: f64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| s.spawn(move || fma_loop(iters)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        best = best.max(flops / start.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Runs `iters` rounds of independent FMAs and returns the FLOPs done.
fn fma_loop(iters: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            let sink = unsafe { x86::fma_avx512(iters) };
            std::hint::black_box(sink);
            return (iters * x86::CHAINS * 16 * 2) as f64;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: AVX2 and FMA were detected just above.
            let sink = unsafe { x86::fma_avx2(iters) };
            std::hint::black_box(sink);
            return (iters * x86::CHAINS * 8 * 2) as f64;
        }
    }
    let mut acc = [1f32; 8];
    let x = std::hint::black_box(0.999_999f32);
    let y = std::hint::black_box(1e-7f32);
    for _ in 0..std::hint::black_box(iters / 16) {
        for a in acc.iter_mut() {
            *a = a.mul_add(x, y);
        }
    }
    std::hint::black_box(acc);
    (iters / 16 * 8 * 2) as f64
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Independent FMA chains per thread: 12 covers a 4-cycle latency at 2 FMAs/cycle
    /// (and leaves AVX2 registers for the constants).
    pub(super) const CHAINS: usize = 12;

    /// # Safety
    ///
    /// AVX2 and FMA present.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn fma_avx2(iters: usize) -> f32 {
        let x = std::hint::black_box(_mm256_set1_ps(0.999_999));
        let y = std::hint::black_box(_mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..std::hint::black_box(iters) {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
        let mut out = [0f32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &a| _mm256_add_ps(s, a));
        // SAFETY: 8 writable floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sum) };
        out.iter().sum()
    }

    /// # Safety
    ///
    /// AVX-512F present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fma_avx512(iters: usize) -> f32 {
        let x = std::hint::black_box(_mm512_set1_ps(0.999_999));
        let y = std::hint::black_box(_mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..std::hint::black_box(iters) {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, &a| _mm512_add_ps(s, a));
        _mm512_reduce_add_ps(sum)
    }
}
