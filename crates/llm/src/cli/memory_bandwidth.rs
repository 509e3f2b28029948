//! A streaming memory-read bandwidth measurement, for `tempra bench` to put decode speed
//! in context (decode reads every weight once per token).

use std::time::Instant;

/// Bytes read per pass: well past any last-level cache.
const BUFFER_BYTES: usize = 256 << 20;
/// Passes; the fastest counts (as STREAM reports its best run).
const PASSES: usize = 5;

/// Reads a 256 MiB buffer with `threads` threads (each its own contiguous share) and
/// returns the best pass's rate in GB/s (10⁹ bytes per second). The buffer is written
/// first so that its pages are real memory, not the shared zero page, and freed after.
pub(crate) fn measure_read_gbs(threads: usize) -> f64 {
    let threads = threads.max(1);
    let mut buffer = vec![0u64; BUFFER_BYTES / 8];
    let share = buffer.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (t, chunk) in buffer.chunks_mut(share).enumerate() {
            s.spawn(move || {
                for (i, v) in chunk.iter_mut().enumerate() {
                    *v = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t as u64;
                }
            });
        }
    });
    let mut best = f64::INFINITY;
    let mut checksum = 0u64;
    for _ in 0..PASSES {
        let start = Instant::now();
        let sums: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = buffer
                .chunks(share)
                .map(|chunk| s.spawn(move || sum(chunk)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).collect()
        });
        best = best.min(start.elapsed().as_secs_f64());
        checksum = sums.into_iter().fold(checksum, u64::wrapping_add);
    }
    std::hint::black_box(checksum);
    BUFFER_BYTES as f64 / best.max(1e-9) / 1e9
}

/// A wrapping sum over eight independent lanes (the compiler turns it into wide loads).
fn sum(values: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.wrapping_add(v);
        }
    }
    lanes
        .iter()
        .chain(rest)
        .fold(0u64, |a, &b| a.wrapping_add(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_adds_every_value() {
        let values: Vec<u64> = (1..=21).collect();
        assert_eq!(sum(&values), 231);
    }
}
