//! Logits of every architecture against Hugging Face `transformers` on tiny random-init
//! models (`tests/data/hf`, made by `make_references.py` there with llama.cpp's
//! `convert_hf_to_gguf.py`): within 1e-4 with an f32 KV cache and 5e-3 with the f16 one,
//! the same top-1 token at every position, for a whole-sequence prefill and for decoding
//! one token at a time.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tempra_llm::engine::{BackendKind, LoadOptions, Model, logits_slice};
use tempra_tensor::DType;

struct Case {
    name: String,
    gguf: PathBuf,
    tokens: Vec<u32>,
    vocab: usize,
    /// `[T · vocab]`, row-major.
    logits: Vec<f32>,
    /// The same with keys and values rounded to f16 (what an f16 cache holds).
    logits_f16kv: Vec<f32>,
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf")
}

fn case(name: &str) -> Case {
    let dir = data_dir();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("references.json")).unwrap()).unwrap();
    let c = &json["cases"][name];
    let tokens: Vec<u32> = c["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let shape: Vec<usize> = c["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let read = |key: &str| -> Vec<f32> {
        let bytes = std::fs::read(dir.join(c[key].as_str().unwrap())).unwrap();
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    let (logits, logits_f16kv) = (read("logits"), read("logits_f16kv"));
    assert_eq!(shape, [tokens.len(), logits.len() / tokens.len()]);
    assert_eq!(logits.len(), logits_f16kv.len());
    Case {
        name: name.into(),
        gguf: dir.join(c["gguf"].as_str().unwrap()),
        tokens,
        vocab: shape[1],
        logits,
        logits_f16kv,
    }
}

fn load(case: &Case, backend: BackendKind, kv_type: DType) -> Arc<Model> {
    let options = LoadOptions {
        kv_type,
        backend,
        threads: Some(2),
        ..LoadOptions::default()
    };
    Model::load(&case.gguf, &options).unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &v)| if v > b.1 { (i, v) } else { b },
        )
        .0
}

/// Max |got − reference| over the rows, or what differs (top-1 first).
fn compare(
    case: &Case,
    reference: &[f32],
    what: &str,
    rows: &[Vec<f32>],
    tolerance: f32,
) -> Result<f32, String> {
    let mut max = 0f32;
    for (p, row) in rows.iter().enumerate() {
        let want = &reference[p * case.vocab..(p + 1) * case.vocab];
        assert_eq!(row.len(), case.vocab);
        let (got_top, want_top) = (argmax(row), argmax(want));
        if got_top != want_top {
            return Err(format!(
                "{} {what}: top-1 {got_top} at position {p}, transformers says {want_top}",
                case.name
            ));
        }
        for (a, b) in row.iter().zip(want) {
            max = max.max(if a.is_finite() {
                (a - b).abs()
            } else {
                f32::INFINITY
            });
        }
    }
    if max > tolerance {
        return Err(format!(
            "{} {what}: max |diff| {max:.3e} > {tolerance:.0e}",
            case.name
        ));
    }
    Ok(max)
}

/// The whole sequence as one prefill (every row's logits), then again one token at a
/// time; each against transformers' f32 logits within `tolerance` and, with an f16
/// cache, also against its logits on f16-rounded keys and values within 1e-3 (far
/// tighter than the f16 cache's own effect of ~3e-3 on these models; not 1e-4, because
/// f32 differences of 1e-6 in a key can round it to the neighbouring f16 value).
fn check(name: &str, backend: BackendKind, kv_type: DType, tolerance: f32) -> Result<(), String> {
    let case = case(name);
    let model = load(&case, backend, kv_type);
    let mut session = model.session().unwrap();
    let all = session.logits_all(&case.tokens).unwrap();
    let values = logits_slice(&all).unwrap();
    let prefill: Vec<Vec<f32>> = values
        .chunks_exact(case.vocab)
        .map(<[f32]>::to_vec)
        .collect();
    session.reset();
    let decode: Vec<Vec<f32>> = case
        .tokens
        .iter()
        .map(|&t| logits_slice(&session.step(t).unwrap()).unwrap().to_vec())
        .collect();
    let mut results = Vec::new();
    for (what, rows) in [("prefill", &prefill), ("decode", &decode)] {
        results.push(compare(
            &case,
            &case.logits,
            &format!("kv {kv_type} {what}"),
            rows,
            tolerance,
        ));
        if kv_type == DType::F16 {
            let what = format!("kv {kv_type} {what} vs f16-rounded reference");
            results.push(compare(&case, &case.logits_f16kv, &what, rows, 1e-3));
        }
    }
    eprintln!("{name} {backend:?} kv {kv_type}: {results:?}");
    results
        .into_iter()
        .collect::<Result<Vec<f32>, String>>()
        .map(drop)
}

/// Checks every architecture, reporting all that fail.
fn check_all(backend: BackendKind, kv_type: DType, tolerance: f32) {
    let failures: Vec<String> = NAMES
        .iter()
        .filter_map(|name| check(name, backend, kv_type, tolerance).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const NAMES: [&str; 6] = ["llama", "llama3", "qwen2", "qwen3", "gemma2", "gemma3"];

#[test]
fn every_architecture_matches_transformers_with_an_f32_cache() {
    check_all(BackendKind::Cpu, DType::F32, 1e-4);
}

#[test]
fn every_architecture_matches_transformers_with_an_f16_cache() {
    check_all(BackendKind::Cpu, DType::F16, 5e-3);
}

#[test]
fn the_reference_backend_matches_transformers() {
    check_all(BackendKind::Reference, DType::F32, 1e-4);
}

/// The references are not degenerate: logits spread and top-1 tokens vary.
#[test]
fn references_are_not_flat() {
    for name in NAMES {
        let case = case(name);
        let tops: std::collections::HashSet<usize> =
            case.logits.chunks_exact(case.vocab).map(argmax).collect();
        assert!(
            tops.len() >= 10,
            "{name}: only {} distinct top-1 tokens",
            tops.len()
        );
        let mean = case.logits.iter().sum::<f32>() / case.logits.len() as f32;
        let var =
            case.logits.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / case.logits.len() as f32;
        assert!(var.sqrt() > 1.0, "{name}: logit std {}", var.sqrt());
    }
}
