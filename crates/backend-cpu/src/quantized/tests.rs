//! Every quantized dot-product kernel against the reference `vec_dot` of
//! `tempra_tensor::quant` (ggml's scalar algorithm) on the same quantized bytes: the
//! integer sums are exact, so only the f32 summation order differs (budget 1e-5 of
//! `Σ|w·a|`); and each row's result is bit-identical whether the row is alone or in a
//! tile of up to the kernel's rows (the row-invariance rule: prefill tiles and decode rows
//! agree).

use tempra_tensor::DType;
use tempra_tensor::quant::{
    dequantize_row, has_quantizer, quantize_row, random_blocks, vec_dot, vec_dot_dtype,
};
use tempra_tensor::random::SplitMix64;

use super::kernels::{BlockStats, FORMATS, QuantKernels, available_kernels};

fn tables() -> Vec<QuantKernels> {
    available_kernels()
}

/// Each Q8_0 block's scale and `Σ qs`, as the GEMV kernels take them.
pub(super) fn block_stats(aq: &[u8]) -> (Vec<f32>, Vec<i32>) {
    let (mut scales, mut sums) = (vec![0f32; aq.len() / 34], vec![0i32; aq.len() / 34]);
    super::q8_0_block_stats(aq, &mut scales, &mut sums);
    (scales, sums)
}

/// `values` quantized to `dtype`; for the formats without a quantizer (IQ1/IQ2/IQ3),
/// random blocks of as many values, seeded by the values.
fn quantized(dtype: DType, values: &[f32]) -> Vec<u8> {
    if !has_quantizer(dtype) {
        let seed = values
            .iter()
            .fold(0u64, |h, v| h.rotate_left(5) ^ v.to_bits() as u64);
        return random_blocks(dtype, values.len() / dtype.block_len(), 1.0, seed).unwrap();
    }
    let mut bytes = vec![0u8; dtype.bytes_for(values.len()).unwrap()];
    quantize_row(dtype, values, &mut bytes).unwrap();
    bytes
}

#[test]
fn kernels_match_the_reference_vec_dot() {
    let mut rng = SplitMix64::new(7);
    for table in tables() {
        for dtype in FORMATS {
            let act = vec_dot_dtype(dtype);
            for blocks in [1usize, 3] {
                let k = blocks * dtype.block_len();
                // Weights with an offset (exercises the mins) and a few outliers.
                let w: Vec<f32> = (0..k)
                    .map(|i| rng.next_normal() as f32 + if i % 37 == 0 { 4.0 } else { 0.3 })
                    .collect();
                let wq = quantized(dtype, &w);
                let rows: Vec<Vec<u8>> = (0..4)
                    .map(|_| {
                        quantized(
                            act,
                            &(0..k).map(|_| rng.next_normal() as f32).collect::<Vec<_>>(),
                        )
                    })
                    .collect();
                let dot = table.dot(dtype).unwrap();
                let alone: Vec<f32> = rows
                    .iter()
                    .map(|a| {
                        let mut out = [0f32];
                        // SAFETY: `blocks` blocks behind both pointers; the table matches
                        // the CPU.
                        unsafe { dot(blocks, wq.as_ptr(), &[a.as_ptr()], &mut out) };
                        out[0]
                    })
                    .collect();
                for r in 1..=4 {
                    let ptrs: Vec<*const u8> = rows[..r].iter().map(|a| a.as_ptr()).collect();
                    let mut out = [0f32; 4];
                    // SAFETY: `blocks` blocks behind every pointer; the table matches the CPU.
                    unsafe { dot(blocks, wq.as_ptr(), &ptrs, &mut out[..r]) };
                    for (i, a) in rows[..r].iter().enumerate() {
                        assert_eq!(
                            out[i].to_bits(),
                            alone[i].to_bits(),
                            "{} {dtype} blocks={blocks}: row {i} of a {r}-row tile differs \
                             from the row alone",
                            table.name
                        );
                        let want = vec_dot(dtype, &wq, a).unwrap();
                        let (mut wd, mut ad) = (vec![0f32; k], vec![0f32; k]);
                        dequantize_row(dtype, &wq, &mut wd).unwrap();
                        dequantize_row(act, a, &mut ad).unwrap();
                        let scale: f32 = wd.iter().zip(&ad).map(|(x, y)| (x * y).abs()).sum();
                        // Q8_1's f16 `s` enters ggml's sum in f32 either way: same budget.
                        assert!(
                            (out[i] - want).abs() <= 1e-5 * scale + 1e-6,
                            "{} {dtype} blocks={blocks} rows={r} row {i}: {} vs {want}",
                            table.name,
                            out[i]
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn unaligned_rows_give_the_same_dots() {
    for table in tables() {
        for dtype in FORMATS {
            let act = vec_dot_dtype(dtype);
            let k = 2 * dtype.block_len();
            let w: Vec<f32> = (0..k).map(|i| (i as f32 * 0.37).sin()).collect();
            let a: Vec<f32> = (0..k).map(|i| (i as f32 * 0.11).cos()).collect();
            let (wq, aq) = (quantized(dtype, &w), quantized(act, &a));
            let dot = table.dot(dtype).unwrap();
            let mut base = [0f32; 1];
            // SAFETY: two blocks behind each pointer.
            unsafe { dot(2, wq.as_ptr(), &[aq.as_ptr()], &mut base) };
            for shift in 1..4 {
                let mut ws = vec![0u8; wq.len() + shift];
                let mut as_ = vec![0u8; aq.len() + shift];
                ws[shift..].copy_from_slice(&wq);
                as_[shift..].copy_from_slice(&aq);
                let mut got = [0f32; 1];
                // SAFETY: as above, at odd addresses.
                unsafe { dot(2, ws[shift..].as_ptr(), &[as_[shift..].as_ptr()], &mut got) };
                assert_eq!(got, base, "{} {dtype} shift {shift}", table.name);
            }
        }
    }
}

#[test]
fn every_table_quantizes_activations_bit_exactly_like_the_reference() {
    let mut rng = SplitMix64::new(5);
    // Random rows, an all-zero block, and a block of exact ties (amax 127: d = 1, so
    // x·id = x and ±k.5 must round away from zero like `roundf`).
    let mut x: Vec<f32> = (0..32 * 9)
        .map(|_| rng.next_normal() as f32 * 3.0)
        .collect();
    x[32..64].fill(0.0);
    for (i, v) in x[64..96].iter_mut().enumerate() {
        *v = if i == 0 {
            127.0
        } else {
            (i as f32 - 16.0) + 0.5
        };
    }
    for table in tables() {
        for dtype in [DType::Q8_0, DType::Q8_1, DType::Q8K] {
            let len = if dtype == DType::Q8K { 256 } else { x.len() };
            let want = quantized(dtype, &x[..len]);
            let mut got = vec![0u8; want.len()];
            (table.quantize)(dtype, &x[..len], &mut got, None).unwrap();
            assert_eq!(got, want, "{} {dtype}", table.name);
        }
        // Q8_0 with each block's scale and Σ qs, as the stats read back from the blocks
        // give them (what the eight-row kernels read).
        let want = quantized(DType::Q8_0, &x);
        let (want_scales, want_sums) = block_stats(&want);
        let mut got = vec![0u8; want.len()];
        let (mut scales, mut sums) = (vec![f32::NAN; x.len() / 32], vec![i32::MIN; x.len() / 32]);
        let stats = BlockStats {
            scales: &mut scales,
            sums: &mut sums,
        };
        (table.quantize)(DType::Q8_0, &x, &mut got, Some(stats)).unwrap();
        assert_eq!(got, want, "{} q8_0 with stats", table.name);
        assert_eq!(sums, want_sums, "{} q8_0 sums", table.name);
        let bits = |v: &[f32]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&scales),
            bits(&want_scales),
            "{} q8_0 scales",
            table.name
        );
        // Stats for another format, or of the wrong length, are refused.
        let stats = BlockStats {
            scales: &mut scales[1..],
            sums: &mut sums[1..],
        };
        assert!((table.quantize)(DType::Q8_0, &x, &mut got, Some(stats)).is_err());
        let mut q8_1 = vec![0u8; quantized(DType::Q8_1, &x).len()];
        let stats = BlockStats {
            scales: &mut scales,
            sums: &mut sums,
        };
        assert!((table.quantize)(DType::Q8_1, &x, &mut q8_1, Some(stats)).is_err());
        // Q8_K over several blocks: random, all zero, and blocks of exact ties: ±127
        // first (the first value of largest magnitude sets the sign of the scale, so the
        // multiplier is ±1 and k.5 must round half to even like `nearest_int`).
        let mut xk: Vec<f32> = (0..256 * 5)
            .map(|_| rng.next_normal() as f32 * 2.0)
            .collect();
        xk[256..512].fill(0.0);
        for (b, first) in [(2usize, -127.0f32), (3, 127.0)] {
            for (i, v) in xk[256 * b..256 * (b + 1)].iter_mut().enumerate() {
                *v = match i {
                    0 => first,
                    200 => -first,
                    _ => ((i % 250) as f32 - 125.0) + 0.5,
                };
            }
        }
        xk[256 * 4 + 77] = -40.0;
        let want = quantized(DType::Q8K, &xk);
        let mut got = vec![0u8; want.len()];
        (table.quantize)(DType::Q8K, &xk, &mut got, None).unwrap();
        assert_eq!(got, want, "{} q8_K blocks", table.name);
        // Errors come through unchanged.
        let mut short = vec![0u8; 10];
        assert!((table.quantize)(DType::Q8_0, &x[..32], &mut short, None).is_err());
    }
}

#[test]
fn interleaved_products_match_the_reference_vec_dot() {
    use crate::interleaved::{InterleavedLayout, interleave_rows};

    let mut rng = SplitMix64::new(13);
    for table in tables() {
        for layout in InterleavedLayout::ALL {
            let base = layout.format();
            let act_dtype = vec_dot_dtype(base);
            let gemm = table.gemm_r8(layout);
            for blocks in [1usize, 3, 9] {
                let k = blocks * base.block_len();
                let rows: Vec<Vec<u8>> = (0..8)
                    .map(|r| {
                        let w: Vec<f32> = (0..k)
                            .map(|i| rng.next_normal() as f32 + if i % 29 == r { 3.0 } else { 0.3 })
                            .collect();
                        quantized(base, &w)
                    })
                    .collect();
                let plain: Vec<u8> = rows.concat();
                // One byte in: any alignment must work.
                let mut packed = vec![0u8; layout.bytes_for(8, k).unwrap() + 1];
                interleave_rows(layout, 8, k, &plain, &mut packed[1..]).unwrap();
                // The first activation row is constant (every byte 127): sums over a
                // sub-block then reach their largest, where a 16-bit partial sum would
                // overflow (Q5_KR8's AVX2 steps); the others are random.
                let act_rows: Vec<Vec<u8>> = (0..gemm.rows)
                    .map(|t| {
                        let a: Vec<f32> = (0..k)
                            .map(|_| {
                                if t == 0 {
                                    0.7
                                } else {
                                    rng.next_normal() as f32
                                }
                            })
                            .collect();
                        quantized(act_dtype, &a)
                    })
                    .collect();
                let stats: Vec<_> = act_rows
                    .iter()
                    .map(|aq| {
                        if act_dtype == DType::Q8_0 {
                            block_stats(aq)
                        } else {
                            (vec![], vec![])
                        }
                    })
                    .collect();
                let acts: Vec<_> = act_rows
                    .iter()
                    .zip(&stats)
                    .map(|(aq, (scales, sums))| super::kernels::ActRow {
                        blocks: aq.as_ptr(),
                        scales: if scales.is_empty() {
                            std::ptr::null()
                        } else {
                            scales.as_ptr()
                        },
                        sums: if sums.is_empty() {
                            std::ptr::null()
                        } else {
                            sums.as_ptr()
                        },
                    })
                    .collect();
                let alone: Vec<[f32; 8]> = acts
                    .iter()
                    .map(|act| {
                        let mut out = [[0f32; 8]];
                        // SAFETY: as below, one activation row.
                        unsafe { (gemm.product)(blocks, packed[1..].as_ptr(), &[*act], &mut out) };
                        out[0]
                    })
                    .collect();
                for count in 1..=gemm.rows {
                    let mut out = vec![[0f32; 8]; count];
                    // SAFETY: one group of `blocks` records; `count` activation rows of
                    // `blocks` blocks of the partner format (with scales and sums for
                    // Q8_0, null for Q8_K); the table matches the CPU.
                    unsafe {
                        (gemm.product)(
                            blocks,
                            packed[1..].as_ptr(),
                            &acts[..count],
                            &mut out[..count],
                        )
                    };
                    for (t, aq) in act_rows[..count].iter().enumerate() {
                        assert_eq!(
                            out[t].map(f32::to_bits),
                            alone[t].map(f32::to_bits),
                            "{} {layout} blocks={blocks}: act {t} of a {count}-row tile \
                             differs from the row alone",
                            table.name
                        );
                        for (r, q) in rows.iter().enumerate() {
                            let want = vec_dot(base, q, aq).unwrap();
                            let (mut wd, mut ad) = (vec![0f32; k], vec![0f32; k]);
                            dequantize_row(base, q, &mut wd).unwrap();
                            dequantize_row(act_dtype, aq, &mut ad).unwrap();
                            let scale: f32 = wd.iter().zip(&ad).map(|(x, y)| (x * y).abs()).sum();
                            assert!(
                                (out[t][r] - want).abs() <= 1e-5 * scale + 1e-6,
                                "{} {layout} blocks={blocks} rows={count} act {t} row {r}: {} vs {want}",
                                table.name,
                                out[t][r]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// ggml's `test-quantize-fns` budget for a format's dot product: `|dot − exact| / n`.
fn ggml_dot_budget(dtype: DType) -> f32 {
    match dtype {
        DType::Q2K | DType::IQ2XXS | DType::IQ2XS | DType::IQ2S => 0.04,
        DType::IQ3XXS | DType::IQ3S => 0.04,
        DType::TQ1_0 | DType::TQ2_0 => 0.15,
        _ => 0.02,
    }
}

/// Every kernel within ggml's `test-quantize-fns` dot-product budget on its test data
/// (4096 values `0.1 + 2 cos(i + offset)`): the weights at offset 0 quantized (random
/// blocks for the formats without a quantizer, whose exact values are then their
/// dequantization), the activations at offset 1 quantized to the partner format, against
/// the exact dot product of the weights' values with the f32 activations.
#[test]
fn kernels_are_within_ggml_dot_budgets() {
    const N: usize = 32 * 128;
    let data = |offset: f32| -> Vec<f32> {
        (0..N)
            .map(|i| (0.1 + (2.0 * (i as f32 + offset).cos()) as f64) as f32)
            .collect()
    };
    let (w, a) = (data(0.0), data(1.0));
    for table in tables() {
        for dtype in FORMATS {
            let wq = quantized(dtype, &w);
            let exact_w = if has_quantizer(dtype) {
                w.clone()
            } else {
                let mut values = vec![0f32; N];
                dequantize_row(dtype, &wq, &mut values).unwrap();
                values
            };
            let exact: f64 = exact_w
                .iter()
                .zip(&a)
                .map(|(x, y)| *x as f64 * *y as f64)
                .sum();
            let aq = quantized(vec_dot_dtype(dtype), &a);
            let dot = table.dot(dtype).unwrap();
            let mut out = [0f32];
            // SAFETY: `N / block_len` blocks behind both pointers; the table matches the
            // CPU.
            unsafe { dot(N / dtype.block_len(), wq.as_ptr(), &[aq.as_ptr()], &mut out) };
            let error = (out[0] as f64 - exact).abs() as f32 / N as f32;
            let budget = ggml_dot_budget(dtype);
            assert!(
                error < budget,
                "{} {dtype}: dot error {error} over ggml's budget {budget}",
                table.name
            );
        }
    }
}
