//! Logits of every architecture against Hugging Face `transformers` on tiny random-init
//! models (`tests/data/hf`, made by `make_references.py` there with llama.cpp's
//! `convert_hf_to_gguf.py`): within 1e-4 with an f32 KV cache and 5e-3 with the f16 one,
//! the same top-1 token at every position, for a whole-sequence prefill and for decoding
//! one token at a time. The YaRN (`qwen3_yarn`) and LongRoPE (`phi3`) cases run to 4x
//! their original context of 8; LongRoPE's short factors are checked within it, and the
//! F32 files of the later architectures once more as Q8_0 files. The mixtures of experts
//! (`qwen3moe`, `qwen2moe`, `mixtral`) skip the positions where transformers' router
//! has a near-tie (a top-k margin below 1e-3, listed in `references.json` and printed):
//! there either choice is right, and the logits follow the choice.

use std::path::{Path, PathBuf};
use std::sync::Arc;

mod hf_cases;
mod quantized_reference;

use quantized_reference::{dequantized_reference, errors, flip_margin};
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
    /// Positions where the reference's router has a near-tie in some layer (either
    /// run), skipped by [`compare`].
    near_ties: Vec<usize>,
    /// Per position, the reference router's smallest top-k margin over the layers
    /// (empty for a dense model).
    router_margins: Vec<f32>,
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
    let mut near_ties: Vec<usize> = c["router_near_ties"]
        .as_array()
        .map(|ties| {
            ties.iter()
                .map(|t| t["position"].as_u64().unwrap() as usize)
                .collect()
        })
        .unwrap_or_default();
    near_ties.sort_unstable();
    near_ties.dedup();
    if !near_ties.is_empty() {
        eprintln!("{name}: router near-ties at positions {near_ties:?}, skipped");
    }
    let router_margins = c["router_margins"]
        .as_array()
        .map(|m| m.iter().map(|v| v.as_f64().unwrap() as f32).collect())
        .unwrap_or_default();
    Case {
        name: name.into(),
        gguf: dir.join(c["gguf"].as_str().unwrap()),
        tokens,
        vocab: shape[1],
        logits,
        logits_f16kv,
        near_ties,
        router_margins,
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
        if case.near_ties.contains(&p) {
            continue;
        }
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
    let failures: Vec<String> = names()
        .iter()
        .filter_map(|name| check(name, backend, kv_type, tolerance).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every case of `references.json`: one per architecture (and rope scaling).
fn names() -> Vec<String> {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("references.json")).unwrap())
            .unwrap();
    json["cases"].as_object().unwrap().keys().cloned().collect()
}

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
    for name in names() {
        let name = name.as_str();
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

/// LongRoPE picks its factors by the session's context, as llama.cpp does: a context
/// within the original 8 positions takes the short factors, which transformers uses for a
/// sequence that short; the model's own context (32) takes the long ones, which differ.
#[test]
fn phi3_takes_the_short_factors_within_the_original_context() {
    let case = case("phi3");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("references.json")).unwrap())
            .unwrap();
    let short = json["cases"]["phi3"]["short_tokens"].as_u64().unwrap() as usize;
    let bytes = std::fs::read(data_dir().join("phi3.logits_short.bin")).unwrap();
    let want: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let rows = |context_length: usize| -> Vec<Vec<f32>> {
        let options = LoadOptions {
            kv_type: DType::F32,
            context_length: Some(context_length),
            threads: Some(2),
            ..LoadOptions::default()
        };
        let model = Model::load(&case.gguf, &options).unwrap();
        let mut session = model.session().unwrap();
        let all = session.logits_all(&case.tokens[..short]).unwrap();
        logits_slice(&all)
            .unwrap()
            .chunks_exact(case.vocab)
            .map(<[f32]>::to_vec)
            .collect()
    };
    let max = compare(&case, &want, "short context", &rows(short), 1e-4).unwrap();
    eprintln!("phi3 short factors: max |diff| {max:.2e}");
    let long = compare(&case, &want, "long context", &rows(32), 1e-3);
    assert!(
        long.is_err(),
        "the long factors gave the short logits: {long:?}"
    );
}

/// The architectures added with F32 weights (and the F16 mixtures of experts), quantized to
/// Q8_0 by `tempra quantize` (and gpt-oss also as it ships: MXFP4 experts, the other
/// matrices Q8_0),
/// against the same model on the exactly dequantized weights through the f32 path (the
/// one the tests above hold to transformers), as `engine_quantized` checks llama: NMSE
/// ≤ 5e-4 over the logits, and the same top-1 token wherever the reference's leads its
/// runner-up by more than six standard deviations of that error. (Against transformers
/// itself the Q8_0 weights' own rounding adds to it: 1e-4 to 6e-4 on these models.)
///
/// In a mixture of experts, Q8_0 weights move the router's probabilities by up to about
/// 1e-2, so a token whose k-th and (k+1)-th experts are that close in the reference may
/// go to the other expert: a position over the budget where the reference router's
/// margin is below [`Q8_ROUTER_MARGIN`] is reported and left out of the error (the top-1
/// rule and the budget hold at every other position).
#[test]
fn quantized_files_of_the_new_architectures_stay_within_the_quantized_budget() {
    const MAX_NMSE: f64 = 5e-4;
    // gpt-oss's MXFP4 experts: the experts' gate/up gain of 4 (so the SwiGLU clamp
    // bites) gives the down projections inputs up to 56 (7 · 8), whose Q8_0 rounding
    // weighs more against 4-bit weights (measured 6.6e-4; a misread scale or bias is
    // orders of magnitude more).
    const MXFP4_MAX_NMSE: f64 = 1e-3;
    const Q8_ROUTER_MARGIN: f32 = 1e-2;
    let mut failures = Vec::new();
    use tempra_llm::quantize::QuantType;
    let runs = hf_cases::NEW_ARCHITECTURE_CASES
        .iter()
        .map(|&name| (name, QuantType::Q8_0))
        .chain([("gpt-oss", QuantType::MXFP4MOE)]);
    for (name, qtype) in runs {
        let case = case(name);
        let file = tempra_llm::model_file::ModelFile::load(&case.gguf, None).unwrap();
        let mut bytes = Vec::new();
        tempra_llm::quantize::quantize_model(&file, qtype, &mut bytes, &mut |_, _| {}).unwrap();
        let q = qtype.name();
        let max_nmse = if qtype == QuantType::MXFP4MOE {
            MXFP4_MAX_NMSE
        } else {
            MAX_NMSE
        };
        let limits = tempra_llm::gguf::Limits::default();
        let q8 =
            tempra_llm::model_file::ModelFile::from_gguf_bytes(Arc::new(bytes), &limits).unwrap();
        let options = LoadOptions {
            kv_type: DType::F32,
            threads: Some(2),
            ..LoadOptions::default()
        };
        let model = Model::from_file(q8, &options).unwrap();
        assert_eq!(
            model.weights().layers[0].wq.tensor().dtype(),
            DType::Q8_0,
            "{name}"
        );
        if qtype == QuantType::MXFP4MOE {
            let ffn = &model.weights().layers[0].ffn;
            assert!(
                ffn.vars()[1..4]
                    .iter()
                    .all(|v| v.tensor().dtype() == DType::MXFP4),
                "{name}: expert stacks in MXFP4"
            );
        }
        let mut session = model.session().unwrap();
        let prefill = logits_slice(&session.logits_all(&case.tokens).unwrap())
            .unwrap()
            .to_vec();
        session.reset();
        let mut decode = Vec::new();
        for &t in &case.tokens {
            decode.extend_from_slice(logits_slice(&session.step(t).unwrap()).unwrap());
        }
        let reference = dequantized_reference(&model, &case.tokens);
        let (_, vs_transformers, _) = errors(&prefill, &case.logits, case.vocab, 0.0);
        eprintln!("{name} {q} against transformers: nmse {vs_transformers:.2e}");
        let margin = flip_margin(&reference, max_nmse);
        for (what, got) in [("prefill", &prefill), ("decode", &decode)] {
            let v = case.vocab;
            let rows = || {
                got.chunks_exact(v)
                    .zip(reference.chunks_exact(v))
                    .enumerate()
            };
            let rerouted: Vec<usize> = rows()
                .filter(|&(p, (g, w))| {
                    case.router_margins
                        .get(p)
                        .is_some_and(|&m| m < Q8_ROUTER_MARGIN)
                        && errors(g, w, v, margin).1 > max_nmse
                })
                .map(|(p, _)| p)
                .collect();
            if !rerouted.is_empty() {
                eprintln!(
                    "{name} {q} {what}: positions {rerouted:?} over the budget where the \
                     router's margin is below {Q8_ROUTER_MARGIN} (margins {:?}), left out",
                    rerouted
                        .iter()
                        .map(|&p| case.router_margins[p])
                        .collect::<Vec<_>>()
                );
            }
            let (kept_got, kept_reference): (Vec<f32>, Vec<f32>) = rows()
                .filter(|(p, _)| !rerouted.contains(p))
                .flat_map(|(_, (g, w))| g.iter().copied().zip(w.iter().copied()))
                .unzip();
            let (_, nmse, flips) = errors(&kept_got, &kept_reference, v, margin);
            eprintln!("{name} {q} {what}: nmse {nmse:.2e}, top-1 margin {margin:.3}");
            if nmse > max_nmse || !flips.is_empty() {
                failures.push(format!(
                    "{name} {q} {what}: nmse {nmse:.2e}, top-1 differs at {flips:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
