//! The `bert` encoder against transformers' `BertModel` (`tests/data/bert`, made by
//! `make_bert_reference.py`: a random-init model converted by llama.cpp's converter,
//! f32 weights): every position's `last_hidden_state`, its mean and its [CLS] row within
//! 1e-4 (its KV cache is f32 whatever the options say), through `Session::embed` and the
//! pooling the file names; and the clear error of asking an encoder for logits.

use std::path::Path;

use tempra_llm::LlmError;
use tempra_llm::engine::{LoadOptions, Model, Pooling};
use tempra_tensor::DType;

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .expect("list")
        .iter()
        .map(|x| x.as_f64().expect("float") as f32)
        .collect()
}

#[test]
fn bert_embeddings_match_transformers() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bert");
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bert.json")).expect("bert.json"))
            .expect("json");
    // The cache option does not matter: an encoder's keys and values stay f32.
    for (threads, kv_type, budget) in [(1, DType::F16, 1e-4), (2, DType::Q8_0, 1e-4)] {
        let model = Model::load(
            dir.join("bert.gguf"),
            &LoadOptions {
                threads: Some(threads),
                kv_type,
                ..LoadOptions::default()
            },
        )
        .expect("load");
        let pooling_key = model.file().metadata().get_u32("bert.pooling_type");
        assert_eq!(
            pooling_key.ok().map(u64::from).and_then(Pooling::from_gguf),
            Some(Pooling::Mean)
        );
        let dim = model.config().embedding_length;
        let mut session = model.session().expect("session");
        for case in golden["cases"].as_array().expect("cases") {
            let tokens: Vec<u32> = case["tokens"]
                .as_array()
                .expect("tokens")
                .iter()
                .map(|t| t.as_u64().expect("id") as u32)
                .collect();
            let hidden = session.hidden_states(&tokens).expect("hidden");
            let got: Vec<f32> = hidden.to_vec_f32().expect("values");
            let want: Vec<f32> = case["hidden"]
                .as_array()
                .expect("rows")
                .iter()
                .flat_map(floats)
                .collect();
            assert_eq!(got.len(), tokens.len() * dim);
            let d = max_diff(&got, &want);
            assert!(
                d <= budget,
                "{threads} threads, {kv_type} cache, {:?}: hidden states differ by {d}",
                case["text"]
            );
            for (pooling, key) in [(Pooling::Mean, "mean"), (Pooling::Cls, "cls")] {
                let got = session.embed(&tokens, pooling, false).expect("embed");
                let d = max_diff(&got, &floats(&case[key]));
                assert!(
                    d <= budget,
                    "{threads} threads, {kv_type}, {key} pooling: {d}"
                );
            }
            session.reset();
        }
        // An encoder has no logits: a clear error, the session unchanged.
        let err = session.prefill(&[2, 54, 3]).expect_err("no logits");
        assert!(
            matches!(&err, LlmError::Argument { what } if what.contains("encoder")),
            "{err}"
        );
        assert_eq!(session.len(), 0);
    }
}
