//! Quantization error budgets, measured as ggml's `tests/test-quantize-fns.cpp` does:
//! 4096 values `x_i = 0.1 + 2 cos(i + offset)`; round-trip error
//! `sqrt(sum (x - dequant(quant(x)))^2) / n` and dot-product error
//! `|vec_dot(quant(w), quant(a)) - dot(w, a)| / n`, with `w` at offset 0 and `a` at offset
//! 1 quantized to the weight format's `vec_dot_dtype`.

use tempra_tensor::DType;
use tempra_tensor::quant::{dequantize_row, quantize_row, vec_dot, vec_dot_dtype};

/// ggml's test size: 32 * 128 values.
const N: usize = 32 * 128;

/// ggml's budgets: 0.002 for 4- to 8-bit formats, 0.004 for Q3_K, 0.0075 for Q2_K, 0.01
/// for the ternary formats (`MAX_QUANTIZATION_TOTAL_ERROR_TERNARY`).
const ROUND_TRIP_BUDGETS: [(DType, f32); 16] = [
    (DType::Q4_0, 0.002),
    (DType::Q4_1, 0.002),
    (DType::Q5_0, 0.002),
    (DType::Q5_1, 0.002),
    (DType::Q8_0, 0.002),
    (DType::Q8_1, 0.002),
    (DType::Q2K, 0.0075),
    (DType::Q3K, 0.004),
    (DType::Q4K, 0.002),
    (DType::Q5K, 0.002),
    (DType::Q6K, 0.002),
    (DType::Q8K, 0.002),
    (DType::IQ4NL, 0.002),
    (DType::IQ4XS, 0.002),
    (DType::TQ1_0, 0.01),
    (DType::TQ2_0, 0.01),
];

/// ggml's `MAX_DOT_PRODUCT_ERROR`, and `MAX_DOT_PRODUCT_ERROR_TERNARY` for the ternary
/// formats.
fn dot_budget(dtype: DType) -> f32 {
    match dtype {
        DType::TQ1_0 | DType::TQ2_0 => 0.15,
        _ => 0.02,
    }
}

/// ggml's `generate_data`: `0.1 + 2*cosf(i + offset)`, the sum taken in double as C does.
fn test_data(offset: f32) -> Vec<f32> {
    (0..N)
        .map(|i| (0.1 + (2.0 * (i as f32 + offset).cos()) as f64) as f32)
        .collect()
}

fn quantized(dtype: DType, values: &[f32]) -> Vec<u8> {
    let mut bytes = vec![0u8; dtype.bytes_for(values.len()).unwrap()];
    quantize_row(dtype, values, &mut bytes).unwrap();
    bytes
}

/// ggml's `array_rmse`: `sqrt(sum of squared differences) / n`.
fn rmse_over_n(a: &[f32], b: &[f32]) -> f32 {
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    (sum.sqrt() / a.len() as f64) as f32
}

#[test]
fn round_trip_error_is_within_ggml_budgets() {
    let x = test_data(0.0);
    let mut failures = Vec::new();
    for (dtype, budget) in ROUND_TRIP_BUDGETS {
        let mut y = vec![0f32; N];
        dequantize_row(dtype, &quantized(dtype, &x), &mut y).unwrap();
        let error = rmse_over_n(&x, &y);
        println!("{dtype:>5} round-trip error {error:.6} (budget {budget})");
        if error.is_nan() || error >= budget {
            failures.push(format!("{dtype}: {error} >= {budget}"));
        }
    }
    assert!(failures.is_empty(), "over budget: {failures:?}");
}

#[test]
fn dot_product_error_is_within_ggml_budget() {
    let (w, a) = (test_data(0.0), test_data(1.0));
    let exact = w
        .iter()
        .zip(&a)
        .map(|(x, y)| *x as f64 * *y as f64)
        .sum::<f64>() as f32;
    let mut failures = Vec::new();
    for (dtype, _) in ROUND_TRIP_BUDGETS {
        let act_dtype = vec_dot_dtype(dtype);
        let got = vec_dot(dtype, &quantized(dtype, &w), &quantized(act_dtype, &a)).unwrap();
        let error = (got - exact).abs() / N as f32;
        let budget = dot_budget(dtype);
        println!("{dtype:>5} x {act_dtype:<4} dot error {error:.6} (budget {budget})");
        if error.is_nan() || error >= budget {
            failures.push(format!("{dtype}: {error} >= {budget}"));
        }
    }
    assert!(failures.is_empty(), "over budget: {failures:?}");
}

/// A quantized dot product must also be close on data that is not a cosine: a seeded
/// pseudo-random row, where each block has its own scale.
#[test]
fn dot_product_error_is_small_on_varied_blocks() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let w: Vec<f32> = (0..N).map(|i| next() * (1.0 + (i / 256) as f32)).collect();
    let a: Vec<f32> = (0..N).map(|_| next()).collect();
    let exact: f64 = w.iter().zip(&a).map(|(x, y)| *x as f64 * *y as f64).sum();
    let magnitude: f64 = w
        .iter()
        .zip(&a)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum();
    for (dtype, budget) in ROUND_TRIP_BUDGETS {
        let act_dtype = vec_dot_dtype(dtype);
        let got = vec_dot(dtype, &quantized(dtype, &w), &quantized(act_dtype, &a)).unwrap() as f64;
        // An empirical bound, relative to the sum of |w_i a_i|: five times the format's
        // round-trip budget (measured errors are 0.02 to 1 times the budget).
        let relative = (got - exact).abs() / magnitude;
        println!("{dtype:>5} relative dot error on varied blocks {relative:.6}");
        assert!(
            relative < 5.0 * budget as f64,
            "{dtype}: relative dot error {relative}"
        );
    }
}
