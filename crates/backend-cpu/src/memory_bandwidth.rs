//! The machine's streaming memory-read bandwidth, measured the same way wherever tempra
//! reports a share of it (`tempra bench`, `cargo xtask bench-facade`): decode reads
//! every weight once per token, so this is the ceiling its speed is judged against.
//!
//! A buffer eight times the last-level cache (256 MiB to 1 GiB) is written once (so its
//! pages are real memory, not the shared zero page), then read by `threads` threads,
//! each summing its own contiguous share; the fastest pass counts (as STREAM reports its
//! best run). Each thread reads its share as four streams in lockstep with 32-byte AVX2
//! loads where the CPU has them (else eight scalar lanes): one sequential stream is
//! limited by the misses a core keeps in flight for it, while the kernels read several
//! at once, and a baseline-x86-64 loop of 16-byte loads under-reports the bandwidth
//! (one 16-byte stream reads clearly less than four 32-byte streams at one thread).

use std::time::Instant;

use crate::isa::Isa;

/// Smallest buffer read, whatever the cache.
const MIN_BYTES: usize = 256 << 20;
/// Largest buffer read.
const MAX_BYTES: usize = 1 << 30;

/// The best of `passes` streaming reads with `threads` threads, in GB/s (10⁹ bytes per
/// second). Allocates (and frees before returning) a buffer of [`buffer_bytes`].
pub fn read_bandwidth_gbs(threads: usize, passes: usize) -> f64 {
    let threads = threads.max(1);
    let words = buffer_bytes() / 8;
    let buffer: Vec<u64> = (0..words as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let share = words.div_ceil(threads);
    let isa = Isa::best_available();
    let mut best = f64::INFINITY;
    let mut checksum = 0u64;
    for _ in 0..passes.max(1) {
        let start = Instant::now();
        let total = std::thread::scope(|s| {
            let handles: Vec<_> = buffer
                .chunks(share)
                .map(|part| s.spawn(move || sum_words(isa, part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0, u64::wrapping_add)
        });
        best = best.min(start.elapsed().as_secs_f64());
        checksum = checksum.wrapping_add(total);
    }
    std::hint::black_box(checksum);
    (words * 8) as f64 / best.max(1e-9) / 1e9
}

/// The bytes [`read_bandwidth_gbs`] reads per pass: eight times the last-level cache,
/// clamped to 256 MiB ..= 1 GiB.
pub fn buffer_bytes() -> usize {
    (8 * last_level_cache_bytes()).clamp(MIN_BYTES, MAX_BYTES)
}

/// The largest CPU cache sysfs reports for CPU 0 (32 MiB when it reports none).
pub fn last_level_cache_bytes() -> usize {
    let mut best = 0;
    for index in 0..8 {
        let path = format!("/sys/devices/system/cpu/cpu0/cache/index{index}/size");
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        best = best.max(parse_cache_size(text.trim()).unwrap_or(0));
    }
    if best == 0 { 32 << 20 } else { best }
}

/// A sysfs cache size (`48K`, `2048K`, `32M`) in bytes.
fn parse_cache_size(text: &str) -> Option<usize> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(digits);
    let n: usize = num.parse().ok()?;
    match unit {
        "" => Some(n),
        "K" => Some(n << 10),
        "M" => Some(n << 20),
        "G" => Some(n << 30),
        _ => None,
    }
}

/// Sums `words` (wrapping) with the widest loads `isa` has.
fn sum_words(isa: Isa, words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if isa >= Isa::Avx2 && Isa::Avx2.is_available() {
        // SAFETY: AVX2 was detected just above.
        return unsafe { x86::sum_four_streams(words) };
    }
    let _ = isa;
    sum_words_plain(words)
}

/// Sums `words` with eight independent accumulators.
fn sum_words_plain(words: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = words.chunks_exact(8);
    let tail: u64 = chunks.remainder().iter().fold(0, |a, &w| a.wrapping_add(w));
    for c in chunks {
        for (a, &w) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(w);
        }
    }
    acc.iter().fold(tail, |a, &w| a.wrapping_add(w))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Sums `words` as four streams read in lockstep (one 32-byte load from each per
    /// step, two per stream and step: 64 bytes, one cache line).
    ///
    /// # Safety
    ///
    /// AVX2 present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_four_streams(words: &[u64]) -> u64 {
        let quarter = words.len() / 32 * 8;
        let (head, tail) = words.split_at(4 * quarter);
        let streams: [&[u64]; 4] = std::array::from_fn(|i| &head[i * quarter..(i + 1) * quarter]);
        let mut acc = [_mm256_setzero_si256(); 8];
        for step in (0..quarter).step_by(8) {
            for (i, s) in streams.iter().enumerate() {
                // SAFETY: `step + 8 <= quarter`, the stream's length.
                let (v0, v1) = unsafe {
                    let p = s.as_ptr().add(step) as *const __m256i;
                    (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
                };
                acc[2 * i] = _mm256_add_epi64(acc[2 * i], v0);
                acc[2 * i + 1] = _mm256_add_epi64(acc[2 * i + 1], v1);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_summer_adds_every_word() {
        let words: Vec<u64> = (1..=1000).map(|i| i * 0x1_0000_0001).collect();
        let want = words.iter().fold(0u64, |a, &w| a.wrapping_add(w));
        for isa in Isa::available() {
            for len in [0, 1, 31, 32, 33, 999, 1000] {
                let part = &words[..len];
                let expect = part.iter().fold(0u64, |a, &w| a.wrapping_add(w));
                assert_eq!(sum_words(isa, part), expect, "{isa}, {len} words");
            }
        }
        assert_eq!(sum_words_plain(&words), want);
    }

    #[test]
    fn cache_sizes_parse_with_their_units() {
        assert_eq!(parse_cache_size("48K"), Some(48 << 10));
        assert_eq!(parse_cache_size("266240K"), Some(266240 << 10));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("12Q"), None);
        assert_eq!(parse_cache_size(""), None);
        assert!((MIN_BYTES..=MAX_BYTES).contains(&buffer_bytes()));
    }
}
