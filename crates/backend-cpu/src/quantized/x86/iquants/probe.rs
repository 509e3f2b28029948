//! A timing probe for the I-quant kernels (ignored test; run with
//! `cargo test --release -p tempra-backend-cpu iquants::probe -- --ignored --nocapture`,
//! `PROBE_DTYPES=iq4_xs,iq2_s` to pick formats). It times by the thread's CPU time
//! (`/proc/thread-self/schedstat`, nanoseconds on the CPU), so other processes sharing
//! the machine cost it little besides cache: the in-cache cost of one block per row count.

use tempra_tensor::DType;
use tempra_tensor::quant::{self, I_QUANTS, vec_dot_dtype};

use crate::quantized::kernels::available_kernels;

/// Nanoseconds this thread has run on a CPU, or `None` where the kernel does not say.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[test]
#[ignore]
fn iquant_dots_cpu_time() {
    let Some(_) = thread_cpu_ns() else {
        eprintln!("no /proc/thread-self/schedstat: nothing measured");
        return;
    };
    let picked = std::env::var("PROBE_DTYPES").unwrap_or_default();
    let k = 4096;
    let rows = 64;
    for kernels in available_kernels()
        .into_iter()
        .filter(|t| t.name != "scalar")
    {
        // Q4_0 and Q4_K first: the figures to compare IQ4_NL and IQ4_XS with.
        for dtype in [DType::Q4_0, DType::Q4K].into_iter().chain(I_QUANTS) {
            if !picked.is_empty() && !picked.split(',').any(|p| p == dtype.name()) {
                continue;
            }
            let act = vec_dot_dtype(dtype);
            let nb = k / dtype.block_len();
            let w = quant::random_blocks(dtype, rows * nb, 1.0, 3).unwrap();
            debug_assert!(w.len() == dtype.bytes_for(rows * k).unwrap());
            let values: Vec<f32> = (0..4 * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let mut a = vec![0u8; act.bytes_for(4 * k).unwrap()];
            quant::quantize_row(act, &values, &mut a).unwrap();
            let (wrow, arow) = (dtype.bytes_for(k).unwrap(), act.bytes_for(k).unwrap());
            let dot = kernels.dot(dtype).unwrap();
            let mut line = format!("{:<18} {:<8}", kernels.name, dtype.name());
            for r in [1usize, 4] {
                let ptrs: Vec<*const u8> = (0..r).map(|i| a[i * arow..].as_ptr()).collect();
                let mut out = [0f32; 4];
                // The CPU time advances at scheduler ticks (a few ms): each trial runs
                // until 150 ms of it have passed, and counts its passes.
                let mut best = f64::MAX;
                for _ in 0..5 {
                    let start = thread_cpu_ns().unwrap_or(0);
                    let mut passes = 0usize;
                    let mut spent = 0;
                    while spent < 150_000_000 {
                        for j in 0..rows {
                            // SAFETY: `nb` blocks per row; the table matches this CPU.
                            unsafe { dot(nb, w[j * wrow..].as_ptr(), &ptrs, &mut out[..r]) };
                        }
                        passes += 1;
                        spent = thread_cpu_ns().unwrap_or(u64::MAX) - start;
                    }
                    best = best.min(spent as f64 / (passes * rows * nb) as f64);
                }
                let per_block = best;
                line += &format!("  rows={r}: {per_block:6.2} ns/block");
            }
            println!("{line}");
        }
    }
}
