//! The block formats against two peer implementations, from goldens in
//! `tests/data/quant/` (see its README.md and make_quant_goldens.py; no Python runs here):
//!
//! - the `gguf` Python package: dequantization of every storage format and quantization
//!   of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, bit- and byte-exact;
//! - ggml's own C reference code: quantization of all twelve formats (including the
//!   K-quants and the activation formats Q8_1 and Q8_K), byte-exact, and the scalar
//!   quantized dot products.

use std::path::PathBuf;

use tempra_tensor::DType;
use tempra_tensor::quant::{dequantize_row, quantize_row, vec_dot, vec_dot_dtype};

const LEGACY: [DType; 5] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
];
const K_QUANTS: [DType; 5] = [DType::Q2K, DType::Q3K, DType::Q4K, DType::Q5K, DType::Q6K];
const ALL: [DType; 12] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q8_1,
    DType::Q2K,
    DType::Q3K,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
    DType::Q8K,
];

fn golden(name: &str) -> Vec<u8> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "data", "quant", name]
        .iter()
        .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading golden {}: {e}", path.display()))
}

fn golden_f32(name: &str) -> Vec<f32> {
    let bytes = golden(name);
    assert_eq!(bytes.len() % 4, 0, "{name} is not whole f32s");
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn dequantized(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    let mut values = vec![0f32; bytes.len() / dtype.block_bytes() * dtype.block_len()];
    dequantize_row(dtype, bytes, &mut values).unwrap();
    values
}

fn quantized(dtype: DType, values: &[f32]) -> Vec<u8> {
    let mut bytes = vec![0u8; dtype.bytes_for(values.len()).unwrap()];
    quantize_row(dtype, values, &mut bytes).unwrap();
    bytes
}

/// Asserts bit equality, naming the first differing value and its block.
fn assert_same_bits(dtype: DType, what: &str, got: &[f32], expected: &[f32]) {
    assert_eq!(got.len(), expected.len(), "{dtype} {what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != expected[i].to_bits()) {
        panic!(
            "{dtype} {what}: value {i} (block {}) is {:e}, the peer has {:e}",
            i / dtype.block_len(),
            got[i],
            expected[i]
        );
    }
}

/// Asserts byte equality, naming the first differing block.
fn assert_same_bytes(dtype: DType, what: &str, got: &[u8], expected: &[u8]) {
    assert_eq!(got.len(), expected.len(), "{dtype} {what}: length");
    let bb = dtype.block_bytes();
    for (i, (g, e)) in got.chunks(bb).zip(expected.chunks(bb)).enumerate() {
        assert_eq!(g, e, "{dtype} {what}: block {i} differs");
    }
}

#[test]
fn dequantize_matches_gguf_on_random_blocks() {
    for dtype in LEGACY.into_iter().chain(K_QUANTS) {
        let blocks = golden(&format!("{dtype}.random.bin"));
        let expected = golden_f32(&format!("{dtype}.random.dequant.f32"));
        assert_same_bits(
            dtype,
            "random blocks",
            &dequantized(dtype, &blocks),
            &expected,
        );
    }
}

#[test]
fn dequantize_matches_gguf_on_quantized_input() {
    for dtype in LEGACY {
        let blocks = golden(&format!("{dtype}.bin"));
        let expected = golden_f32(&format!("{dtype}.dequant.f32"));
        assert_same_bits(
            dtype,
            "gguf-quantized input",
            &dequantized(dtype, &blocks),
            &expected,
        );
    }
}

#[test]
fn quantize_matches_gguf_bytes() {
    let input = golden_f32("legacy_input.f32");
    for dtype in LEGACY {
        let expected = golden(&format!("{dtype}.bin"));
        assert_same_bytes(
            dtype,
            "quantized by gguf",
            &quantized(dtype, &input),
            &expected,
        );
    }
}

#[test]
fn quantize_matches_ggml_reference_bytes() {
    let input = golden_f32("ggml/input.f32");
    for dtype in ALL {
        let expected = golden(&format!("ggml/{dtype}.bin"));
        assert_same_bytes(
            dtype,
            "quantized by ggml",
            &quantized(dtype, &input),
            &expected,
        );
    }
    let act = golden_f32("ggml/act.f32");
    for dtype in [DType::Q8_0, DType::Q8_1, DType::Q8K] {
        let expected = golden(&format!("ggml/act.{dtype}.bin"));
        assert_same_bytes(
            dtype,
            "activations quantized by ggml",
            &quantized(dtype, &act),
            &expected,
        );
    }
}

/// ggml's scalar dot products against ours, row by row (4 rows of 512 values).
///
/// For the 32-value formats and Q2_K both sum one f32 term per block in block order, so
/// the results are bit-equal. ggml's scalar Q3_K..Q6_K code spreads each block's integer
/// sum over 8 lanes and accumulates `d * lane` across blocks per lane; ours scales each
/// block's exact integer sum once. Same integers, different f32 rounding: those agree to
/// within 1e-5 of the sum of the terms' magnitudes.
#[test]
fn vec_dot_matches_ggml_reference() {
    const ROW: usize = 512;
    for dtype in LEGACY.into_iter().chain(K_QUANTS) {
        let act_dtype = vec_dot_dtype(dtype);
        let w = golden(&format!("ggml/{dtype}.bin"));
        let act = golden(&format!("ggml/act.{act_dtype}.bin"));
        let expected = golden_f32(&format!("ggml/{dtype}.vec_dot.f32"));
        let (w_row, act_row) = (
            dtype.bytes_for(ROW).unwrap(),
            act_dtype.bytes_for(ROW).unwrap(),
        );
        assert_eq!(expected.len() * w_row, w.len());
        for (r, &want) in expected.iter().enumerate() {
            let w_bytes = &w[r * w_row..(r + 1) * w_row];
            let act_bytes = &act[r * act_row..(r + 1) * act_row];
            let got = vec_dot(dtype, w_bytes, act_bytes).unwrap();
            if LEGACY.contains(&dtype) || dtype == DType::Q2K {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{dtype} row {r}: {got} vs ggml {want}"
                );
            } else {
                let magnitude: f64 = dequantized(dtype, w_bytes)
                    .iter()
                    .zip(dequantized(act_dtype, act_bytes))
                    .map(|(a, b)| (*a as f64 * b as f64).abs())
                    .sum();
                let diff = (got as f64 - want as f64).abs();
                assert!(
                    diff <= 1e-5 * magnitude,
                    "{dtype} row {r}: {got} vs ggml {want}"
                );
            }
        }
    }
}
