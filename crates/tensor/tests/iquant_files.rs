//! I-quant and ternary blocks from model files that llama.cpp's `llama-quantize` wrote
//! (with `llama-imatrix`'s importance matrix for the IQ1/IQ2/IQ3 types), dequantized
//! bit-exactly as the `gguf` Python package dequantizes them. The goldens and the script
//! that made them are in `tests/data/quant/file/` and `make_iquant_file_goldens.py`.

use std::path::PathBuf;

use tempra_tensor::quant::{I_QUANTS, dequantize_row};

fn golden(name: &str) -> Vec<u8> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "data",
        "quant",
        "file",
        name,
    ]
    .iter()
    .collect();
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading golden {}: {e}", path.display()))
}

#[test]
fn blocks_from_llama_quantize_files_dequantize_as_gguf_py_does() {
    for dtype in I_QUANTS {
        let blocks = golden(&format!("{dtype}.bin"));
        let want: Vec<f32> = golden(&format!("{dtype}.dequant.f32"))
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(
            blocks.len() % dtype.block_bytes(),
            0,
            "{dtype}: whole blocks"
        );
        assert_eq!(
            want.len(),
            blocks.len() / dtype.block_bytes() * dtype.block_len()
        );
        let mut got = vec![0f32; want.len()];
        dequantize_row(dtype, &blocks, &mut got).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{dtype}: value {i} (block {}) is {g:e}, gguf-py has {w:e}",
                i / dtype.block_len()
            );
        }
        // The files' blocks are no all-zero padding: most values are non-zero.
        let nonzero = got.iter().filter(|v| **v != 0.0).count();
        assert!(
            nonzero * 2 > got.len(),
            "{dtype}: {nonzero} of {} non-zero",
            got.len()
        );
    }
}
