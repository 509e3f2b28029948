//! Fuzz-style tests of the GGUF reader: truncation at every offset, seeded random bit
//! flips, and huge length fields always give an error or a valid parse (whose every
//! tensor can then be read), never a panic, an out-of-bounds read or a giant allocation.

use std::sync::Arc;

use tempra_llm::gguf::{Array, GgufWriter, Limits, Metadata, TensorSpec, Value};
use tempra_llm::{LlmError, ModelFile};
use tempra_tensor::random::SplitMix64;
use tempra_tensor::{DType, Shape};

/// A small valid file: a few keys of each kind and three tensors.
fn sample() -> Vec<u8> {
    let mut md = Metadata::new();
    md.set("general.architecture", "llama");
    md.set("general.alignment", 32u32);
    md.set(
        "tokenizer.ggml.tokens",
        Array::String(vec![b"<unk>".to_vec(), b"a".to_vec(), b"b".to_vec()]),
    );
    md.set("tokenizer.ggml.scores", Array::F32(vec![0.0, -1.0, -2.0]));
    md.set(
        "x.nested",
        Array::Array(vec![Array::U8(vec![1]), Array::Bool(vec![true])]),
    );
    md.set("x.flag", Value::Bool(false));
    let specs = vec![
        TensorSpec::new("a.weight", Shape::new(&[2, 4]).unwrap(), DType::F32),
        TensorSpec::new("b.weight", Shape::new(&[1, 32]).unwrap(), DType::Q8_0),
        TensorSpec::new("c.weight", Shape::new(&[3]).unwrap(), DType::F16),
    ];
    let mut w = GgufWriter::new(Vec::new(), &md, specs.clone()).unwrap();
    for s in &specs {
        w.write_data(&vec![0x3c; s.byte_len().unwrap()]).unwrap();
    }
    w.finish().unwrap()
}

/// Parses `bytes`; on success reads every tensor through its zero-copy view.
fn parse_and_touch(bytes: &[u8]) -> Result<(), LlmError> {
    let model = ModelFile::from_gguf_bytes(Arc::new(bytes.to_vec()), &Limits::default())?;
    for info in model.tensor_infos() {
        let t = model.tensor(info.name())?;
        let values = t.to_vec_f32()?;
        assert_eq!(values.len(), info.spec.elem_count());
    }
    Ok(())
}

fn error_text(bytes: &[u8]) -> String {
    parse_and_touch(bytes)
        .expect_err("should be rejected")
        .to_string()
}

#[test]
fn the_sample_parses() {
    parse_and_touch(&sample()).unwrap();
}

#[test]
fn every_truncation_is_an_error_or_a_valid_file() {
    let bytes = sample();
    let mut ok = 0;
    for len in 0..bytes.len() {
        match parse_and_touch(&bytes[..len]) {
            Ok(()) => ok += 1,
            Err(e) => assert!(matches!(e, LlmError::Gguf { .. }), "len {len}: {e}"),
        }
    }
    // Only cuts inside the last tensor's padding leave a valid file.
    assert!(ok < 32, "{ok} truncations parsed");
}

#[test]
fn random_bit_flips_never_panic() {
    let bytes = sample();
    let mut rng = SplitMix64::new(0x5eed);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..4000 {
        let mut damaged = bytes.clone();
        for _ in 0..1 + rng.next_u64() % 4 {
            let bit = (rng.next_u64() % (damaged.len() as u64 * 8)) as usize;
            damaged[bit / 8] ^= 1 << (bit % 8);
        }
        match parse_and_touch(&damaged) {
            Ok(()) => ok += 1,
            Err(_) => err += 1,
        }
    }
    assert!(ok > 0 && err > 0, "{ok} parsed, {err} rejected");
}

#[test]
fn random_garbage_after_the_magic_never_panics() {
    let mut rng = SplitMix64::new(9);
    for _ in 0..2000 {
        let len = (rng.next_u64() % 200) as usize;
        let mut bytes = b"GGUF\x03\0\0\0".to_vec();
        bytes.extend((0..len).map(|_| rng.next_u64() as u8));
        let _ = parse_and_touch(&bytes);
    }
}

/// Byte offset of the first occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn huge_counts_and_lengths_are_rejected_before_allocating() {
    let bytes = sample();
    let patch = |at: usize, value: &[u8]| {
        let mut b = bytes.clone();
        b[at..at + value.len()].copy_from_slice(value);
        b
    };
    let huge = u64::MAX.to_le_bytes();
    let big = (1u64 << 40).to_le_bytes();

    let e = error_text(&patch(8, &huge));
    assert!(e.contains("tensor count") && e.contains("byte 8"), "{e}");
    let e = error_text(&patch(16, &huge));
    assert!(
        e.contains("metadata key count") && e.contains("byte 16"),
        "{e}"
    );
    // The first key's length.
    let e = error_text(&patch(24, &huge));
    assert!(
        e.contains("string length") && e.contains("metadata key #0"),
        "{e}"
    );
    let e = error_text(&patch(24, &(1u64 << 12).to_le_bytes()));
    assert!(
        e.contains("metadata key #0") && e.contains("truncated"),
        "{e}"
    );

    // The token array's count: over the limit, then under it but beyond the file.
    let key = find(&bytes, b"tokenizer.ggml.tokens");
    let count_at = key + "tokenizer.ggml.tokens".len() + 4 + 4;
    let e = error_text(&patch(count_at, &huge));
    assert!(
        e.contains("tokenizer.ggml.tokens") && e.contains("array length"),
        "{e}"
    );
    assert!(e.contains(&format!("byte {count_at}")), "{e}");
    let e = error_text(&patch(count_at, &(1u64 << 25).to_le_bytes()));
    assert!(e.contains("cannot fit"), "{e}");

    // The first token's string length.
    let e = error_text(&patch(count_at + 8, &big));
    assert!(
        e.contains("tokenizer.ggml.tokens") && e.contains("string length"),
        "{e}"
    );

    // Tensor `a.weight`: n_dims, a dim, the type, the offset.
    let name = find(&bytes, b"a.weight");
    let n_dims_at = name + 8;
    let e = error_text(&patch(n_dims_at, &u32::MAX.to_le_bytes()));
    assert!(e.contains("tensor `a.weight`") && e.contains("dims"), "{e}");
    let e = error_text(&patch(n_dims_at, &5u32.to_le_bytes()));
    assert!(e.contains("5 dims"), "{e}");
    let e = error_text(&patch(n_dims_at + 4, &huge));
    assert!(
        e.contains("tensor `a.weight`") && e.contains("too large"),
        "{e}"
    );
    let e = error_text(&patch(n_dims_at + 4, &(1u64 << 62).to_le_bytes()));
    assert!(
        e.contains("tensor `a.weight`") && e.contains("overflow"),
        "{e}"
    );
    let e = error_text(&patch(n_dims_at + 4, &(1u64 << 20).to_le_bytes()));
    assert!(e.contains("runs past the end"), "{e}");
    let type_at = n_dims_at + 4 + 16;
    let e = error_text(&patch(type_at, &99u32.to_le_bytes()));
    assert!(
        e.contains("tensor `a.weight`")
            && e.contains("ggml type 99")
            && e.contains(&format!("byte {type_at}")),
        "{e}"
    );
    let e = error_text(&patch(type_at + 4, &huge));
    assert!(e.contains("tensor `a.weight`"), "{e}");
    let e = error_text(&patch(type_at + 4, &8u64.to_le_bytes()));
    assert!(e.contains("not a multiple of the alignment 32"), "{e}");
}

#[test]
fn bad_alignment_element_counts_and_duplicates_are_rejected() {
    let bytes = sample();
    let key = find(&bytes, b"general.alignment");
    let value_at = key + "general.alignment".len() + 4;
    let mut b = bytes.clone();
    b[value_at..value_at + 4].copy_from_slice(&48u32.to_le_bytes());
    let e = error_text(&b);
    assert!(
        e.contains("general.alignment")
            && e.contains("power of two")
            && e.contains(&format!("byte {value_at}")),
        "{e}"
    );

    // Q8_0 rows must be a multiple of 32 values.
    let name = find(&bytes, b"b.weight");
    let mut b = bytes.clone();
    b[name + 12..name + 20].copy_from_slice(&33u64.to_le_bytes());
    let e = error_text(&b);
    assert!(
        e.contains("tensor `b.weight`") && e.contains("block size 32"),
        "{e}"
    );

    // Rename `b.weight` to `a.weight`.
    let mut b = bytes.clone();
    b[name] = b'a';
    assert!(error_text(&b).contains("duplicate tensor name"));

    // A bool that is neither 0 nor 1.
    let key = find(&bytes, b"x.flag");
    let mut b = bytes.clone();
    b[key + 6 + 4] = 2;
    assert!(error_text(&b).contains("bool byte 2"));
}

#[test]
fn headers_that_are_not_gguf_v2_or_v3() {
    assert!(error_text(b"").contains("not a GGUF file"));
    assert!(error_text(b"GGU").contains("only 3 bytes"));
    assert!(error_text(b"PK\x03\x04 zip").contains("not a GGUF file"));
    let mut b = sample();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(error_text(&b).contains("v1"));
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(error_text(&b).contains("big-endian"));
    b[4..8].copy_from_slice(&77u32.to_le_bytes());
    assert!(error_text(&b).contains("version 77"));
}

#[test]
fn nesting_is_capped() {
    fn nested(depth: u32) -> Array {
        if depth == 1 {
            Array::U8(vec![7])
        } else {
            Array::Array(vec![nested(depth - 1)])
        }
    }
    let file = |depth| {
        let mut md = Metadata::new();
        md.set("deep", nested(depth));
        GgufWriter::new(Vec::new(), &md, vec![])
            .unwrap()
            .finish()
            .unwrap()
    };
    let limits = Limits::default();
    parse_and_touch(&file(limits.max_array_depth)).unwrap();
    let e = error_text(&file(limits.max_array_depth + 1));
    assert!(e.contains("`deep`") && e.contains("nested deeper"), "{e}");
}

#[test]
fn tighter_limits_apply() {
    let limits = Limits {
        max_string_len: 3,
        ..Limits::default()
    };
    let e = ModelFile::from_gguf_bytes(Arc::new(sample()), &limits)
        .unwrap_err()
        .to_string();
    assert!(e.contains("exceeds the limit of 3"), "{e}");
}
