//! `linear` on the CPU backend against the ReferenceBackend (the spec) for every weight
//! format: float weights (F32, F16, BF16) through the GEMV/GEMM, block-quantized
//! weights through the integer dot products.
//!
//! Budgets (normalized MSE against the reference, which multiplies the dequantized
//! weights by the f32 inputs in f64):
//! - float weights: 1e-9, f32 accumulation only (see `matmul_reference.rs`);
//! - quantized weights: 5e-4, ggml's `test-backend-ops` budget for MUL_MAT. The CPU path
//!   quantizes the input rows to Q8_0/Q8_1 (32-value blocks, scale amax/127) or Q8_K
//!   (256-value blocks); the rounding error of Gaussian inputs is then ≈ 2e-5 (Q8_0) to
//!   ≈ 5e-5 (Q8_K) of their energy, and the outputs inherit that ratio, so the budget
//!   leaves a 10× margin while still catching any wrong block, scale or nibble (those
//!   give errors of order 1).

mod products;

use products::{cpu_contexts, float_tensor, nmse, normal, quant_formats, quantized_tensor};
use tempra_backend_cpu::interleaved::{InterleavedLayout, InterleavedWeight, interleave_rows};
use tempra_tensor::{DType, ExecContext, Tensor};

const FLOAT_BUDGET: f64 = 1e-9;
const QUANT_BUDGET: f64 = 5e-4;

fn check(label: &str, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, budget: f64) {
    let want = ExecContext::reference().linear(x, w, bias).unwrap();
    for (name, ctx) in cpu_contexts() {
        let got = ctx.linear(x, w, bias).unwrap();
        assert_eq!(got.dims(), want.dims(), "{label} on {name}");
        let e = nmse(&got.to_vec_f32().unwrap(), &want.to_vec_f32().unwrap());
        assert!(e <= budget, "{label} on {name}: nmse {e:e} > {budget:e}");
    }
}

#[test]
fn float_weights_odd_shapes() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (i, &(m, n, k)) in [
            (1, 17, 33),
            (1, 257, 255),
            // Rows of whole 16-value pairs (the BF16 GEMV's split `x`): one 32-value step
            // and a 16-value tail, the longest split row, and one past it.
            (1, 19, 48),
            (1, 7, 8192),
            (1, 3, 8208),
            (3, 33, 17),
            (17, 3, 257),
            (70, 33, 300),
        ]
        .iter()
        .enumerate()
        {
            let x = float_tensor(&normal(m * k, i as u64), &[m, k], DType::F32);
            let w = float_tensor(&normal(n * k, 50 + i as u64), &[n, k], dtype);
            check(&format!("{dtype} {m}x{n}x{k}"), &x, &w, None, FLOAT_BUDGET);
        }
    }
}

#[test]
fn float_weights_with_bias_batches_and_views() {
    let (n, k) = (33, 40);
    let w = float_tensor(&normal(n * k, 1), &[n, k], DType::F32);
    let bias = float_tensor(&normal(n, 2), &[n], DType::F32);
    let x = float_tensor(&normal(2 * 5 * k, 3), &[2, 5, k], DType::F32);
    check("batched + bias", &x, &w, Some(&bias), FLOAT_BUDGET);
    // A transposed input (strided rows) and a single strided row.
    let xt = float_tensor(&normal(7 * k, 4), &[k, 7], DType::F32)
        .t()
        .unwrap();
    check("xᵀ rows", &xt, &w, Some(&bias), FLOAT_BUDGET);
    check(
        "one strided row",
        &xt.narrow(0, 2, 1).unwrap(),
        &w,
        None,
        FLOAT_BUDGET,
    );
    let x1 = float_tensor(&normal(k, 5), &[k], DType::F32);
    check("rank-1 input", &x1, &w, Some(&bias), FLOAT_BUDGET);
    // A weight whose rows are a window of a wider matrix.
    let wide = float_tensor(&normal(n * (k + 8), 6), &[n, k + 8], DType::F16);
    let wn = wide.narrow(1, 4, k).unwrap();
    check("narrowed weight, one row", &x1, &wn, None, FLOAT_BUDGET);
    check("narrowed weight, rows", &x, &wn, None, FLOAT_BUDGET);
}

#[test]
fn quantized_weights_every_format() {
    let reference = ExecContext::reference();
    for (f, dtype) in quant_formats().into_iter().enumerate() {
        let bl = dtype.block_len();
        // One weight row (n = 1) over 33 input rows: the NMSE of fewer outputs scatters
        // past the budget on its own (5 rows of a random IQ2_XS row drew 7.7e-4).
        for (i, &(m, n, kb)) in [(1, 33, 2), (3, 17, 1), (1, 255, 3), (33, 1, 2), (17, 40, 2)]
            .iter()
            .enumerate()
        {
            let k = kb * bl.max(64);
            let seed = (f * 10 + i) as u64;
            let x = float_tensor(&normal(m * k, seed), &[m, k], DType::F32);
            let w = quantized_tensor(&reference, &normal(n * k, 1000 + seed), n, k, dtype);
            check(&format!("{dtype} {m}x{n}x{k}"), &x, &w, None, QUANT_BUDGET);
        }
    }
}

#[test]
fn quantized_weights_bias_strided_input_and_batches() {
    let reference = ExecContext::reference();
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q4K, DType::Q6K] {
        let (n, k) = (19, 512);
        let w = quantized_tensor(&reference, &normal(n * k, 7), n, k, dtype);
        let bias = float_tensor(&normal(n, 8), &[n], DType::F32);
        let x = float_tensor(&normal(2 * 3 * k, 9), &[2, 3, k], DType::F32);
        check(
            &format!("{dtype} batched + bias"),
            &x,
            &w,
            Some(&bias),
            QUANT_BUDGET,
        );
        let xt = float_tensor(&normal(6 * k, 10), &[k, 6], DType::F32)
            .t()
            .unwrap();
        check(&format!("{dtype} xᵀ"), &xt, &w, None, QUANT_BUDGET);
        // A window of weight rows (offset into the storage).
        let rows = w.narrow(0, 3, 11).unwrap();
        check(
            &format!("{dtype} narrowed rows"),
            &x,
            &rows,
            Some(&bias.narrow(0, 0, 11).unwrap()),
            QUANT_BUDGET,
        );
    }
}

#[test]
fn quantized_prefill_tile_edges() {
    // Row counts around the 4-row dot tile and weight-row blocks of 32, and past the
    // switch to the dequantize-while-packing GEMM (32 rows).
    let reference = ExecContext::reference();
    for dtype in [DType::Q8_0, DType::Q5_1, DType::Q5K] {
        let k = 256;
        for m in [2, 4, 6, 9, 40] {
            let n = 37;
            let x = float_tensor(&normal(m * k, m as u64), &[m, k], DType::F32);
            let w = quantized_tensor(&reference, &normal(n * k, 99), n, k, dtype);
            check(&format!("{dtype} m={m}"), &x, &w, None, QUANT_BUDGET);
        }
    }
}

#[test]
fn prepared_weights_give_the_same_products() {
    // `prepare_weight` interleaves Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4 rows in groups
    // of eight where the ISA has the kernels; the product must not change: against the
    // reference (which reads the prepared weight converted back to its dtype's layout,
    // bit for bit as the original) and equal across thread counts. 40 rows take the
    // prefill path (integer products for Q4_0, Q4_K, Q5_K and MXFP4, the dequantizing
    // GEMM for Q8_0 and Q6_K).
    let reference = ExecContext::reference();
    for dtype in [
        DType::Q4_0,
        DType::Q8_0,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        DType::MXFP4,
    ] {
        for (n, k) in [(8, 256), (24, 512), (264, 512)] {
            let w = quantized_tensor(&reference, &normal(n * k, n as u64), n, k, dtype);
            let bias = float_tensor(&normal(n, 3), &[n], DType::F32);
            let mut by_threads = Vec::new();
            for (name, ctx) in cpu_contexts() {
                let Some(prepared) = ctx.prepare_weight(&w).unwrap() else {
                    assert!(
                        name.contains("scalar"),
                        "{name} keeps {dtype} rows as they are"
                    );
                    continue;
                };
                let layout = InterleavedLayout::of(dtype).unwrap();
                assert_eq!(prepared.dtype(), dtype);
                assert_eq!(InterleavedWeight::of(&prepared).unwrap().layout(), layout);
                assert_eq!(prepared.dims(), w.dims());
                for m in [1, 3, 40] {
                    let x = float_tensor(&normal(m * k, 50 + m as u64), &[m, k], DType::F32);
                    let label = format!("{dtype} {m}x{n}x{k} prepared on {name}");
                    let want = reference.linear(&x, &w, Some(&bias)).unwrap();
                    let got = ctx.linear(&x, &prepared, Some(&bias)).unwrap();
                    let e = nmse(&got.to_vec_f32().unwrap(), &want.to_vec_f32().unwrap());
                    assert!(e <= QUANT_BUDGET, "{label}: nmse {e:e}");
                    let via_reference = reference.linear(&x, &prepared, Some(&bias)).unwrap();
                    assert_eq!(
                        via_reference.to_vec_f32().unwrap(),
                        want.to_vec_f32().unwrap(),
                        "{label}: the reference reads the interleaved layout"
                    );
                    by_threads.push((name.clone(), m, got.to_vec_f32().unwrap()));
                    // A view of whole groups past the first (the kernels and the
                    // dequantizing packer find the groups from the view's offset).
                    if n >= 24 {
                        let (part, whole) = (
                            prepared.narrow(0, 8, 16).unwrap(),
                            w.narrow(0, 8, 16).unwrap(),
                        );
                        let want = reference.linear(&x, &whole, None).unwrap();
                        let got = ctx.linear(&x, &part, None).unwrap();
                        let e = nmse(&got.to_vec_f32().unwrap(), &want.to_vec_f32().unwrap());
                        assert!(e <= QUANT_BUDGET, "{label}, rows 8..24: nmse {e:e}");
                    }
                }
            }
            // Equal across thread counts on one ISA (the 256- and 512-bit IQ4 and MXFP4
            // products sum a block's halves in another order).
            let isa = |name: &str| {
                name.rsplit_once('-')
                    .map_or(name.to_owned(), |(i, _)| i.to_owned())
            };
            for (name, m, got) in &by_threads {
                let (_, _, first) = by_threads
                    .iter()
                    .find(|(n0, m0, _)| m0 == m && isa(n0) == isa(name))
                    .unwrap();
                assert_eq!(
                    got, first,
                    "{dtype} {n}x{k} m={m}: {name} differs across threads"
                );
            }
        }
    }
}

#[test]
fn prepare_splits_large_weights_over_the_workers_bit_exactly() {
    // 1024 × 2048 Q8_0 (2.2 MB interleaved): two tasks of whole groups at 3 threads. Every
    // context's copy must equal the single-threaded `interleave_rows` byte for byte.
    let reference = ExecContext::reference();
    let (n, k) = (1024, 2048);
    let w = quantized_tensor(&reference, &normal(n * k, 7), n, k, DType::Q8_0);
    let target = InterleavedLayout::Q8_0R8;
    let mut want = vec![0u8; target.bytes_for(n, k).unwrap()];
    interleave_rows(target, n, k, w.storage().host_bytes().unwrap(), &mut want).unwrap();
    for (name, ctx) in cpu_contexts() {
        let Some(prepared) = ctx.prepare_weight(&w).unwrap() else {
            assert!(
                name.contains("scalar"),
                "{name} keeps Q8_0 rows as they are"
            );
            continue;
        };
        let got = InterleavedWeight::of(&prepared).unwrap().bytes();
        assert!(
            got == want.as_slice(),
            "{name}: the interleaved copy differs"
        );
    }
}

#[test]
fn prepare_keeps_weights_it_cannot_interleave() {
    let reference = ExecContext::reference();
    for (name, ctx) in cpu_contexts() {
        // Not a multiple of eight rows, a format without an interleaved layout, a
        // strided view: all kept.
        let odd = quantized_tensor(&reference, &normal(12 * 64, 1), 12, 64, DType::Q4_0);
        assert!(ctx.prepare_weight(&odd).unwrap().is_none(), "{name}");
        for other in [DType::Q5_0, DType::Q2K, DType::Q3K] {
            let w = quantized_tensor(&reference, &normal(16 * 256, 2), 16, 256, other);
            assert!(ctx.prepare_weight(&w).unwrap().is_none(), "{name} {other}");
        }
        let f32w = float_tensor(&normal(16 * 64, 3), &[64, 16], DType::F32)
            .t()
            .unwrap();
        assert!(ctx.prepare_weight(&f32w).unwrap().is_none(), "{name}");
        // A linear with an interleaved weight that is not whole groups is refused.
        let w = quantized_tensor(&reference, &normal(16 * 64, 4), 16, 64, DType::Q4_0);
        if let Some(p) = ctx.prepare_weight(&w).unwrap() {
            let x = float_tensor(&normal(64, 5), &[1, 64], DType::F32);
            let err = ctx
                .linear(&x, &p.narrow(0, 0, 4).unwrap(), None)
                .unwrap_err();
            assert!(err.to_string().contains("groups of 8"), "{name}: {err}");
        }
    }
}

#[test]
fn other_ops_read_a_prepared_weight_converted_back() {
    // Only `linear` reads the interleaved layout. A dequantizing cast is handed to the
    // reference (counted), which reads the weight converted back to its dtype's layout:
    // the values of the original, never the interleaved bytes taken for the file's.
    let reference = ExecContext::reference();
    for dtype in [DType::Q4_0, DType::Q4K, DType::Q6K] {
        let w = quantized_tensor(&reference, &normal(16 * 256, 8), 16, 256, dtype);
        let want = w.to_vec_f32().unwrap();
        for (name, ctx) in cpu_contexts() {
            let Some(p) = ctx.prepare_weight(&w).unwrap() else {
                continue;
            };
            assert_eq!(p.to_vec_f32().unwrap(), want, "{name} {dtype}");
            let before = ctx.handoffs().get("copy").copied().unwrap_or(0);
            let cast = ctx.cast(&p, DType::F32).unwrap();
            assert_eq!(cast.to_vec_f32().unwrap(), want, "{name} {dtype}: cast");
            let after = ctx.handoffs().get("copy").copied().unwrap_or(0);
            assert_eq!(
                after,
                before + 1,
                "{name} {dtype}: the cast is a counted hand-off"
            );
            let err = p.storage().host_bytes().unwrap_err();
            assert!(err.to_string().contains("prepared layout"), "{name}: {err}");
        }
    }
}
