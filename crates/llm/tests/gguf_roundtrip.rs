//! GGUF writer → reader round trips: every metadata value type, nested arrays, alignment,
//! tensors of plain and block dtypes, zero-copy views; writer argument checks.

use std::sync::Arc;

use tempra_llm::gguf::{Array, GgufWriter, Limits, Metadata, TensorSpec, Value};
use tempra_llm::{LlmError, ModelFile, ModelFormat};
use tempra_tensor::{DType, Shape};

fn all_value_types() -> Metadata {
    let mut md = Metadata::new();
    md.set("general.architecture", "llama");
    md.set("t.u8", Value::U8(200));
    md.set("t.i8", Value::I8(-100));
    md.set("t.u16", Value::U16(60000));
    md.set("t.i16", Value::I16(-30000));
    md.set("t.u32", Value::U32(4_000_000_000));
    md.set("t.i32", Value::I32(-2_000_000_000));
    md.set("t.f32", Value::F32(1e-5));
    md.set("t.bool", Value::Bool(true));
    md.set("t.string", "héllo ▁world");
    md.set("t.bytes", Value::String(vec![0xff, 0x00, 0xfe])); // not UTF-8: kept as bytes
    md.set("t.u64", Value::U64(u64::MAX));
    md.set("t.i64", Value::I64(i64::MIN));
    md.set("t.f64", Value::F64(std::f64::consts::PI));
    md.set("a.u8", Array::U8(vec![1, 2, 3]));
    md.set("a.i8", Array::I8(vec![-1, 0, 1]));
    md.set("a.u16", Array::U16(vec![1, 65535]));
    md.set("a.i16", Array::I16(vec![-2, 2]));
    md.set("a.u32", Array::U32(vec![7; 5]));
    md.set("a.i32", Array::I32(vec![1, 3, 6]));
    md.set("a.f32", Array::F32(vec![0.5, -0.25]));
    md.set("a.bool", Array::Bool(vec![true, false, true]));
    md.set(
        "a.string",
        Array::String(vec![b"<unk>".to_vec(), vec![], "▁the".into()]),
    );
    md.set("a.u64", Array::U64(vec![u64::MAX, 0]));
    md.set("a.i64", Array::I64(vec![-5]));
    md.set("a.f64", Array::F64(vec![1.5]));
    md.set("a.empty", Array::F32(vec![]));
    md.set(
        "a.nested",
        Array::Array(vec![
            Array::U32(vec![1, 2]),
            Array::String(vec![b"x".to_vec()]),
            Array::Array(vec![Array::Bool(vec![false]), Array::Array(vec![])]),
        ]),
    );
    md
}

/// Tensors of several dtypes with deterministic bytes.
fn tensors() -> Vec<(TensorSpec, Vec<u8>)> {
    let specs = [
        ("f32.weight", vec![3, 5], DType::F32),
        ("norm.weight", vec![7], DType::F32),
        ("f16.weight", vec![2, 3, 4], DType::F16),
        ("q8.weight", vec![4, 64], DType::Q8_0),
        ("q4k.weight", vec![2, 256], DType::Q4K),
        ("bf16.weight", vec![1, 1, 2, 2], DType::BF16),
    ];
    specs
        .into_iter()
        .map(|(name, dims, dtype)| {
            let spec = TensorSpec::new(name, Shape::new(&dims).unwrap(), dtype);
            let mut bytes: Vec<u8> = (0..spec.byte_len().unwrap())
                .map(|i| (i * 31 + name.len()) as u8)
                .collect();
            if dtype == DType::F32 {
                // Real floats, to check values through the zero-copy view.
                let values: Vec<f32> = (0..spec.elem_count())
                    .map(|i| i as f32 * 0.5 - 1.0)
                    .collect();
                bytes = bytemuck::cast_slice(&values).to_vec();
            }
            (spec, bytes)
        })
        .collect()
}

fn write(md: &Metadata, tensors: &[(TensorSpec, Vec<u8>)]) -> Vec<u8> {
    let mut w = GgufWriter::new(
        Vec::new(),
        md,
        tensors.iter().map(|(s, _)| s.clone()).collect(),
    )
    .unwrap();
    for (_, bytes) in tensors {
        // Two chunks per tensor: chunked writes land in the same place.
        let (a, b) = bytes.split_at(bytes.len() / 2);
        w.write_data(a).unwrap();
        w.write_data(b).unwrap();
    }
    w.finish().unwrap()
}

fn parse(bytes: Vec<u8>) -> ModelFile {
    ModelFile::from_gguf_bytes(Arc::new(bytes), &Limits::default()).unwrap()
}

fn check_round_trip(md: &Metadata, alignment: u64) {
    let tensors = tensors();
    let model = parse(write(md, &tensors));
    assert_eq!(model.metadata(), md);
    let ModelFormat::Gguf {
        version,
        alignment: found,
        data_offset,
    } = model.format()
    else {
        panic!("not GGUF")
    };
    assert_eq!((version, found), (3, alignment));
    assert_eq!(data_offset % alignment, 0);
    assert_eq!(model.tensor_infos().len(), tensors.len());
    for ((spec, bytes), info) in tensors.iter().zip(model.tensor_infos()) {
        assert_eq!(&info.spec, spec);
        assert_eq!(info.offset % alignment, 0, "{} aligned", spec.name);
        assert_eq!(
            model.tensor_bytes(info).unwrap(),
            &bytes[..],
            "{}",
            spec.name
        );
        let t = model.tensor(&spec.name).unwrap();
        assert_eq!(t.dims(), spec.shape.dims());
        assert_eq!(t.dtype(), spec.dtype);
        assert_eq!(t.storage().kind(), "mapped", "zero-copy");
    }
    let f = model.tensor("f32.weight").unwrap().to_vec_f32().unwrap();
    assert_eq!(f[..3], [-1.0, -0.5, 0.0]);
    assert!(matches!(
        model.tensor("nope"),
        Err(LlmError::MissingTensor { .. })
    ));
}

#[test]
fn every_value_type_and_dtype_round_trips() {
    check_round_trip(&all_value_types(), 32);
}

#[test]
fn custom_alignment_round_trips() {
    for alignment in [1u32, 8, 64, 4096] {
        let mut md = all_value_types();
        md.set("general.alignment", alignment);
        check_round_trip(&md, alignment as u64);
    }
}

#[test]
fn rewriting_a_parsed_file_gives_the_same_bytes() {
    let bytes = write(&all_value_types(), &tensors());
    let model = parse(bytes.clone());
    assert_eq!(model.write_gguf(Vec::new()).unwrap(), bytes);
}

#[test]
fn version_2_files_read() {
    let mut bytes = write(&all_value_types(), &tensors());
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    let model = parse(bytes);
    assert!(matches!(
        model.format(),
        ModelFormat::Gguf { version: 2, .. }
    ));
}

#[test]
fn opens_a_file_through_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.gguf");
    std::fs::write(&path, write(&all_value_types(), &tensors())).unwrap();
    let model = ModelFile::open(&path).unwrap();
    let t = model.tensor("q8.weight").unwrap();
    drop(model); // the tensor keeps the mapping alive
    assert_eq!(t.to_vec_f32().unwrap().len(), 256);

    let e = ModelFile::open(dir.path().join("missing.gguf")).unwrap_err();
    assert!(
        matches!(e, LlmError::Io { .. }) && e.to_string().contains("missing.gguf"),
        "{e}"
    );
    let e = ModelFile::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    let e = ModelFile::open(&empty).unwrap_err().to_string();
    assert!(e.contains("not a GGUF file"), "{e}");
}

#[test]
fn vocab_only_files_have_no_tensors() {
    let md = all_value_types();
    let model = parse(write(&md, &[]));
    assert!(model.tensor_infos().is_empty());
    assert_eq!(model.metadata(), &md);
}

#[test]
fn writer_rejects_bad_arguments() {
    let md = Metadata::new();
    let spec =
        |name: &str, dims: &[usize], dtype| TensorSpec::new(name, Shape::new(dims).unwrap(), dtype);
    let bad = [
        vec![spec("a", &[2], DType::F32), spec("a", &[2], DType::F32)],
        vec![spec("", &[2], DType::F32)],
        vec![spec("q", &[2, 33], DType::Q8_0)],
        vec![spec("r", &[1, 1, 1, 1, 2], DType::F32)],
        vec![spec("s", &[], DType::F32)],
        vec![spec("u", &[4], DType::U8)],
    ];
    for specs in bad {
        let e = GgufWriter::new(Vec::new(), &md, specs.clone())
            .err()
            .unwrap();
        assert!(matches!(e, LlmError::Argument { .. }), "{specs:?}: {e}");
    }
    let mut md_bad = Metadata::new();
    md_bad.set("general.alignment", 3u32);
    assert!(GgufWriter::new(Vec::new(), &md_bad, vec![]).is_err());

    let mut w = GgufWriter::new(Vec::new(), &md, vec![spec("a", &[2], DType::F32)]).unwrap();
    assert!(w.write_data(&[0; 9]).is_err(), "more than the tensor holds");
    w.write_data(&[0; 4]).unwrap();
    assert_eq!(w.current_tensor().unwrap().name, "a");
    let e = w.finish().err().unwrap().to_string();
    assert!(e.contains("incomplete") && e.contains("4 of 8"), "{e}");

    let mut w = GgufWriter::new(Vec::new(), &md, vec![spec("a", &[2], DType::F32)]).unwrap();
    w.write_data(&[0; 8]).unwrap();
    assert!(w.current_tensor().is_none());
    assert!(w.write_data(&[0]).is_err(), "after the last tensor");
}

#[test]
fn released_pages_read_back_unchanged() {
    // A 1 MiB tensor in a mapped file: releasing its pages (as the loader does after
    // copying a weight into a prepared layout) must leave every byte readable and equal,
    // from the mapping and through the tensor; in-memory files ignore the call.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gguf");
    let n = 1 << 18;
    let bytes: Vec<u8> = (0..4 * n).map(|i| (i * 7 % 251) as u8).collect();
    let spec = TensorSpec::new("big.weight", Shape::new(&[n]).unwrap(), DType::F32);
    let mut md = Metadata::new();
    md.set("general.architecture", "llama");
    std::fs::write(&path, write(&md, &[(spec, bytes.clone())])).unwrap();
    let model = ModelFile::open(&path).unwrap();
    let t = model.tensor("big.weight").unwrap();
    assert_eq!(t.storage().host_bytes().unwrap(), &bytes[..]);
    model.release_pages(t.storage().host_bytes().unwrap());
    assert_eq!(t.storage().host_bytes().unwrap(), &bytes[..]);
    let again = model.tensor("big.weight").unwrap();
    assert_eq!(again.storage().host_bytes().unwrap(), &bytes[..]);

    let in_memory = parse(std::fs::read(&path).unwrap());
    let t = in_memory.tensor("big.weight").unwrap();
    in_memory.release_pages(t.storage().host_bytes().unwrap());
    assert_eq!(t.storage().host_bytes().unwrap(), &bytes[..]);
}
