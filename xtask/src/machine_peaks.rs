//! The machine's peaks, measured in the same run as the benchmarks so that percentages
//! hold across machines: streaming read bandwidth and FMA throughput, per thread count.

use std::time::Instant;

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

/// The last-level cache size from sysfs (32 MiB when unknown).
pub(crate) fn llc_bytes() -> usize {
    let mut best = 0;
    for index in 0..8 {
        let path = format!("/sys/devices/system/cpu/cpu0/cache/index{index}/size");
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let text = text.trim();
        let (num, unit) = text.split_at(
            text.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(text.len()),
        );
        let Ok(n) = num.parse::<usize>() else {
            continue;
        };
        let bytes = match unit {
            "K" => n << 10,
            "M" => n << 20,
            "G" => n << 30,
            _ => n,
        };
        best = best.max(bytes);
    }
    if best == 0 { 32 << 20 } else { best }
}

/// Streaming read of a buffer 8× the last-level cache (at least 256 MiB): the best of a
/// few passes, each thread summing its own contiguous part.
fn read_bandwidth(threads: usize, quick: bool) -> f64 {
    let bytes = (8 * llc_bytes()).clamp(256 << 20, 1 << 30);
    let words = bytes / 8;
    // Written once so every page is committed before timing.
    let buffer: Vec<u64> = (0..words as u64).collect();
    let passes = if quick { 5 } else { 9 };
    let mut best = 0f64;
    for _ in 0..passes {
        let start = Instant::now();
        let total: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = buffer
                .chunks(words.div_ceil(threads))
                .map(|part| s.spawn(move || sum_words(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0, u64::wrapping_add)
        });
        let secs = start.elapsed().as_secs_f64();
        std::hint::black_box(total);
        best = best.max(bytes as f64 / secs / 1e9);
    }
    best
}

/// Sums `words`: with AVX2 loads where the CPU has them (a baseline-x86-64 build would
/// read 16 bytes per instruction and under-report the bandwidth), else plain code.
fn sum_words(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected just above.
        return unsafe { x86::sum_avx2(words) };
    }
    sum_words_plain(words)
}

/// Sums `words` with eight independent accumulators.
fn sum_words_plain(words: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = words.chunks_exact(8);
    let tail: u64 = chunks.remainder().iter().fold(0, |a, &w| a.wrapping_add(w));
    for c in chunks {
        for i in 0..8 {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    acc.iter().fold(tail, |a, &w| a.wrapping_add(w))
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

    /// Sums `words` as four streams read in lockstep (one 32-byte load from each per
    /// step): one sequential stream is limited by how many misses a core keeps in flight
    /// for it, while kernels such as the 4-row GEMV read several at once.
    ///
    /// # Safety
    ///
    /// AVX2 present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_avx2(words: &[u64]) -> u64 {
        let quarter = words.len() / 16 * 4;
        let (head, tail) = words.split_at(4 * quarter);
        let streams: [&[u64]; 4] = std::array::from_fn(|i| &head[i * quarter..(i + 1) * quarter]);
        let mut acc = [_mm256_setzero_si256(); 4];
        for step in (0..quarter).step_by(4) {
            for (a, s) in acc.iter_mut().zip(&streams) {
                // SAFETY: `step + 4 <= quarter`, the stream's length.
                let v = unsafe { _mm256_loadu_si256(s.as_ptr().add(step) as *const __m256i) };
                *a = _mm256_add_epi64(*a, v);
            }
        }
        let mut out = [0u64; 4];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_si256(), |s, &a| _mm256_add_epi64(s, a));
        // SAFETY: 4 writable u64s.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, sum) };
        out.iter()
            .fold(super::sum_words_plain(tail), |a, &w| a.wrapping_add(w))
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
