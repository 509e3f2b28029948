//! `POST /v1/embeddings`: unit vectors equal to the engine's pooled hidden states, the
//! same for the same input however the request batches it, in `float` or `base64`, and
//! 400s naming the input at fault.

use serde_json::{Value, json};
use tempra_llm::engine::Pooling;
use tempra_llm::tokenizer::TokenizeOptions;

use crate::fixtures::{SMALL, load, model_file, start};
use crate::http_client::post;

/// The embeddings of a response, by index.
fn vectors(response: &Value) -> Vec<Vec<f32>> {
    let data = response["data"].as_array().expect("data");
    data.iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!(d["index"], i, "{d}");
            assert_eq!(d["object"], "embedding");
            d["embedding"]
                .as_array()
                .expect("floats")
                .iter()
                .map(|x| x.as_f64().expect("float") as f32)
                .collect()
        })
        .collect()
}

#[test]
fn embeddings_are_the_engines_pooled_hidden_states() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    for pooling in [Pooling::Mean, Pooling::Last, Pooling::Cls] {
        let server = start(load(&dir, 128)?, |c| {
            c.slots = 2;
            c.pooling = Some(pooling);
        })?;
        let texts = ["the cat sat on the mat", "hello <|assistant|> world", "a"];
        let reply = post(
            server.addr,
            "/v1/embeddings",
            &json!({"input": texts, "model": "x"}),
        )?;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let response = reply.json()?;
        assert_eq!(response["object"], "list");
        let got = vectors(&response);
        assert_eq!(got.len(), 3);
        let mut session = server.model.session()?;
        let mut tokens = 0;
        for (text, vector) in texts.iter().zip(&got) {
            let ids = server.model.vocab().tokenize(
                text,
                TokenizeOptions {
                    add_special: true,
                    parse_special: false,
                },
            );
            tokens += ids.len();
            let want = session.embed(&ids, pooling, true)?;
            assert_eq!(vector.len(), server.model.config().embedding_length);
            assert_eq!(vector, &want, "{pooling}: {text:?}");
            let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        }
        assert_eq!(response["usage"]["prompt_tokens"], tokens);
        // Alone, or again in another batch: the same vector.
        let alone = post(server.addr, "/v1/embeddings", &json!({"input": texts[1]}))?.json()?;
        assert_eq!(vectors(&alone)[0], got[1]);
        let again = post(
            server.addr,
            "/v1/embeddings",
            &json!({"input": [texts[2], texts[1], texts[1], texts[0]]}),
        )?
        .json()?;
        let again = vectors(&again);
        assert_eq!(
            (&again[1], &again[2], &again[3]),
            (&got[1], &got[1], &got[0])
        );
    }
    Ok(())
}

#[test]
fn base64_embeddings_decode_to_the_floats() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |_| {})?;
    let floats = post(server.addr, "/v1/embeddings", &json!({"input": [1, 5, 9]}))?.json()?;
    let encoded = post(
        server.addr,
        "/v1/embeddings",
        &json!({"input": [1, 5, 9], "encoding_format": "base64"}),
    )?
    .json()?;
    let text = encoded["data"][0]["embedding"].as_str().expect("base64");
    let bytes = decode_base64(text);
    let decoded: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(decoded, vectors(&floats)[0]);
    Ok(())
}

/// Standard base64 with padding.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    for quad in text.as_bytes().chunks(4) {
        let pad = quad.iter().filter(|&&c| c == b'=').count();
        let n = quad
            .iter()
            .map(|&c| if c == b'=' { 0 } else { u32::from(value(c)) })
            .fold(0u32, |n, v| (n << 6) | v);
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    out
}

#[test]
fn bad_embedding_requests_name_the_input() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 16)?, |_| {})?;
    let long = "word ".repeat(64);
    let cases = [
        (json!({"input": []}), "input"),
        (json!({"input": ["ok", long]}), "input[1]"),
        (json!({"input": [[1, 2], [3, 400]]}), "input[1]"),
        (json!({"input": ""}), "input"),
        (
            json!({"input": "x", "encoding_format": "hex"}),
            "encoding_format",
        ),
        (json!({"input": "x", "dimensions": 3}), "dimensions"),
        (json!({"input": 5}), "input"),
    ];
    for (body, param) in cases {
        let reply = post(server.addr, "/v1/embeddings", &body)?;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        assert_eq!(
            reply.json()?["error"]["param"],
            param,
            "{body}: {}",
            reply.body
        );
    }
    let reply = post(
        server.addr,
        "/v1/embeddings",
        &json!({"input": ["ok", long]}),
    )?;
    assert_eq!(reply.json()?["error"]["code"], "context_length_exceeded");
    let reply = post(
        server.addr,
        "/v1/embeddings",
        &json!({"input": "still serving"}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    Ok(())
}

#[test]
fn a_bert_model_serves_embeddings_and_refuses_generation() -> anyhow::Result<()> {
    use std::path::Path;
    use std::sync::Arc;
    use tempra_llm::engine::{LoadOptions, Model};

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bert");
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("bert.json"))?)?;
    let model: Arc<Model> = Model::load(
        dir.join("bert.gguf"),
        &LoadOptions {
            threads: Some(1),
            ..LoadOptions::default()
        },
    )?;
    // The file's pooling (mean), unit length: transformers' mean pooling normalised.
    let server = start(model, |_| {})?;
    let case = &golden["cases"][1];
    let reply = post(
        server.addr,
        "/v1/embeddings",
        &json!({"input": case["text"]}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let got = vectors(&reply.json()?).remove(0);
    let mean: Vec<f64> = case["mean"]
        .as_array()
        .expect("mean")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let norm = mean.iter().map(|x| x * x).sum::<f64>().sqrt();
    let worst = got
        .iter()
        .zip(&mean)
        .map(|(g, m)| (f64::from(*g) - m / norm).abs())
        .fold(0.0, f64::max);
    assert!(worst <= 1e-4, "{worst}");
    let reply = post(server.addr, "/v1/completions", &json!({"prompt": "hello"}))?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("encoder"), "{}", reply.body);
    Ok(())
}
