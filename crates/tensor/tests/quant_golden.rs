//! The block formats against two peer implementations, from goldens in
//! `tests/data/quant/` (see its README.md and make_quant_goldens.py; no Python runs here):
//!
//! - the `gguf` Python package: dequantization of every storage format (the I-quants,
//!   ternary formats and MXFP4 included) and quantization of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
//!   and MXFP4, bit- and byte-exact;
//! - ggml's own C reference code: quantization of the twelve legacy and K formats
//!   (including the activation formats Q8_1 and Q8_K) and of IQ4_NL, IQ4_XS, TQ1_0 and
//!   TQ2_0, byte-exact, and the scalar quantized dot products of all of them.
//!
//! `tests/iquant_files.rs` checks blocks from files `llama-quantize` wrote.

use std::path::PathBuf;

use tempra_tensor::DType;
use tempra_tensor::quant::{I_QUANTS, dequantize_row, quantize_row, vec_dot, vec_dot_dtype};

const LEGACY: [DType; 5] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
];
const K_QUANTS: [DType; 5] = [DType::Q2K, DType::Q3K, DType::Q4K, DType::Q5K, DType::Q6K];
/// The I-quant and ternary formats ggml quantizes without an importance matrix.
const I_QUANTIZABLE: [DType; 4] = [DType::IQ4NL, DType::IQ4XS, DType::TQ1_0, DType::TQ2_0];
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
    for dtype in LEGACY
        .into_iter()
        .chain(K_QUANTS)
        .chain(I_QUANTS)
        .chain([DType::MXFP4])
    {
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
    for dtype in LEGACY.into_iter().chain([DType::MXFP4]) {
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
    for dtype in LEGACY.into_iter().chain([DType::MXFP4]) {
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
    for dtype in ALL.into_iter().chain(I_QUANTIZABLE) {
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

/// ggml's scalar dot products against ours, row by row (4 rows of 512 values; the
/// I-quants that ggml cannot quantize without an importance matrix on the random blocks
/// of the gguf goldens).
///
/// For the 32-value formats, Q2_K, the ternary formats and the IQ1/IQ2/IQ3 formats both
/// sum one f32 term per block in block order (ggml's per-row power-of-two factor of the
/// IQ2/IQ3 formats is exact either way), so the results are bit-equal. ggml's scalar
/// Q3_K..Q6_K code spreads each block's integer sum over 8 lanes and accumulates
/// `d * lane` across blocks per lane, and its IQ4_XS code scales each 32-value sub-block
/// in f32; ours scales each block's exact integer sum once. Same integers, different f32
/// rounding: those agree to within 1e-5 of the sum of the terms' magnitudes.
#[test]
fn vec_dot_matches_ggml_reference() {
    const ROW: usize = 512;
    for dtype in LEGACY.into_iter().chain(K_QUANTS).chain(I_QUANTS) {
        let act_dtype = vec_dot_dtype(dtype);
        let w = if I_QUANTS.contains(&dtype) && !I_QUANTIZABLE.contains(&dtype) {
            golden(&format!("{dtype}.random.bin"))
        } else {
            golden(&format!("ggml/{dtype}.bin"))
        };
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
            let scaled_per_lane = matches!(
                dtype,
                DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K | DType::IQ4XS
            );
            if !scaled_per_lane {
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
