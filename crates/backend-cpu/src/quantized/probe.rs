//! Timing probes for tuning (ignored tests; run with
//! `cargo test --release -p tempra-backend-cpu quantized::probe -- --ignored --nocapture`).

use std::time::Instant;

use tempra_tensor::DType;
use tempra_tensor::quant::{quantize_row, vec_dot_dtype};

use super::kernels::best_kernels;

#[test]
#[ignore]
fn dot_in_cache() {
    let kernels = best_kernels();
    let k = 4096;
    let rows = 64;
    for dtype in [DType::Q4_0, DType::Q8_0, DType::Q4K, DType::Q6K] {
        let act = vec_dot_dtype(dtype);
        let vals: Vec<f32> = (0..rows * k).map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.1).collect();
        let mut w = vec![0u8; dtype.bytes_for(rows * k).unwrap()];
        quantize_row(dtype, &vals, &mut w).unwrap();
        let mut a = vec![0u8; act.bytes_for(4 * k).unwrap()];
        quantize_row(act, &vals[..4 * k], &mut a).unwrap();
        let nb = k / dtype.block_len();
        let (wrow, arow) = (dtype.bytes_for(k).unwrap(), act.bytes_for(k).unwrap());
        let dot = kernels.dot(dtype).unwrap();
        for r in [1usize, 4] {
            let ptrs: Vec<*const u8> = (0..r).map(|i| a[i * arow..].as_ptr()).collect();
            let mut out = [0f32; 4];
            let reps = 200;
            let best = (0..5)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..reps {
                        for j in 0..rows {
                            // SAFETY: `nb` blocks per row, kernels match this CPU.
                            unsafe { dot(nb, w[j * wrow..].as_ptr(), &ptrs, &mut out[..r]) };
                        }
                    }
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min);
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
