//! `logprobs`, `top_logprobs`, `echo` and `logit_bias`: the reported log-probabilities
//! are the log-softmax of the engine's own logits at each position (greedy runs here, so
//! the engine's argmax gives the same tokens), streamed or not, for the output and for an
//! echoed prompt.

use std::sync::Arc;

use serde_json::{Value, json};
use tempra_llm::chat::ChatMessage;
use tempra_llm::engine::{Model, logits_slice};
use tempra_llm::tokenizer::DetokenizeOptions;

use crate::fixtures::{SMALL, chat_tokens, completion_tokens, load, model_file, start};
use crate::http_client::post;

/// The tolerance on a log-probability: the server decodes in batched steps, the
/// reference one token at a time (the f32 model's rows agree to rounding).
const TOLERANCE: f64 = 1e-4;

/// One position of the reference: the log-softmax of the engine's logits.
struct Position {
    /// log-softmax over the vocabulary.
    logprobs: Vec<f64>,
    /// The greedy token (the first maximum).
    argmax: u32,
}

impl Position {
    fn new(logits: &[f32]) -> Position {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let lse = f64::from(max)
            + logits
                .iter()
                .map(|&l| (f64::from(l) - f64::from(max)).exp())
                .sum::<f64>()
                .ln();
        let argmax = logits
            .iter()
            .enumerate()
            .fold(0, |best, (i, &l)| if l > logits[best] { i } else { best });
        Position {
            logprobs: logits.iter().map(|&l| f64::from(l) - lse).collect(),
            argmax: argmax as u32,
        }
    }

    /// The `k` most likely tokens, most likely first.
    fn top(&self, k: usize) -> Vec<u32> {
        let mut ids: Vec<u32> = (0..self.logprobs.len() as u32).collect();
        ids.sort_by(|&a, &b| {
            self.logprobs[b as usize]
                .total_cmp(&self.logprobs[a as usize])
                .then(a.cmp(&b))
        });
        ids.truncate(k);
        ids
    }
}

/// The reference positions of a greedy generation of `n` tokens after `prompt`, one
/// token at a time, and the tokens.
fn greedy_positions(model: &Arc<Model>, prompt: &[u32], n: usize) -> anyhow::Result<Vec<Position>> {
    let mut session = model.session()?;
    let mut logits = session.prefill(prompt)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let position = Position::new(logits_slice(&logits)?);
        let next = position.argmax;
        out.push(position);
        logits = session.step(next)?;
    }
    Ok(out)
}

/// A token as completions' lists show it.
fn completion_text(model: &Model, id: u32) -> String {
    let bytes = model.vocab().token_piece(id, true).expect("piece");
    match String::from_utf8(bytes.clone()) {
        Ok(text) => text,
        Err(_) => bytes
            .iter()
            .fold("bytes:".to_owned(), |s, b| format!("{s}\\x{b:02x}")),
    }
}

/// A token's text and bytes as the server shows them.
fn token_text(model: &Model, id: u32) -> (String, Vec<u8>) {
    let bytes = model.vocab().token_piece(id, true).expect("piece");
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

fn close(got: &Value, want: f64) -> bool {
    got.as_f64().is_some_and(|g| (g - want).abs() <= TOLERANCE)
}

/// Checks chat `logprobs.content` entries against the reference positions.
fn check_chat_entries(model: &Model, entries: &[Value], reference: &[Position], k: usize) {
    assert_eq!(entries.len(), reference.len(), "{entries:?}");
    for (i, (entry, position)) in entries.iter().zip(reference).enumerate() {
        let chosen = position.argmax;
        let (text, bytes) = token_text(model, chosen);
        assert_eq!(entry["token"], text.as_str(), "token {i}: {entry}");
        assert_eq!(entry["bytes"], json!(bytes), "token {i}: {entry}");
        assert!(
            close(&entry["logprob"], position.logprobs[chosen as usize]),
            "token {i}: {entry} against {}",
            position.logprobs[chosen as usize]
        );
        let top = entry["top_logprobs"].as_array().expect("top_logprobs");
        let want = position.top(k);
        assert_eq!(top.len(), k, "token {i}: {entry}");
        for (alt, &id) in top.iter().zip(&want) {
            assert_eq!(
                alt["token"],
                token_text(model, id).0.as_str(),
                "token {i}: {entry}"
            );
            assert!(
                close(&alt["logprob"], position.logprobs[id as usize]),
                "token {i}: {entry}"
            );
        }
    }
}

#[test]
fn chat_logprobs_are_the_log_softmax_of_the_engine_logits() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |_| {})?;
    let messages = vec![ChatMessage::new("user", "name three colours")];
    let prompt = chat_tokens(&server.model, &messages)?;
    let reference = greedy_positions(&server.model, &prompt, 6)?;
    let body = json!({"messages": [{"role": "user", "content": "name three colours"}],
                      "max_tokens": 6, "temperature": 0, "ignore_eos": true,
                      "logprobs": true, "top_logprobs": 5});
    let reply = post(server.addr, "/v1/chat/completions", &body)?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let response = reply.json()?;
    let entries = response["choices"][0]["logprobs"]["content"]
        .as_array()
        .expect("logprobs.content")
        .clone();
    check_chat_entries(&server.model, &entries, &reference, 5);
    // The content is the text of the tokens listed.
    let ids: Vec<u32> = reference.iter().map(|p| p.argmax).collect();
    let options = DetokenizeOptions {
        render_special: false,
        strip_leading_space: false,
    };
    assert_eq!(
        response["choices"][0]["message"]["content"],
        server.model.vocab().detokenize(&ids, options)?
    );

    // Streamed: the chunks' entries are the same list.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let reply = post(server.addr, "/v1/chat/completions", &streamed)?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let mut chunked = Vec::new();
    for data in reply.sse_data() {
        if data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&data)?;
        if let Some(content) = chunk["choices"][0]["logprobs"]["content"].as_array() {
            chunked.extend(content.iter().cloned());
        }
    }
    assert_eq!(chunked, entries);

    // `logprobs: true` alone: the chosen tokens, no alternatives; not asked: null.
    let mut bare = body.clone();
    bare.as_object_mut().expect("object").remove("top_logprobs");
    let response = post(server.addr, "/v1/chat/completions", &bare)?.json()?;
    let entries = response["choices"][0]["logprobs"]["content"]
        .as_array()
        .expect("content")
        .clone();
    check_chat_entries(&server.model, &entries, &reference, 0);
    bare.as_object_mut().expect("object").remove("logprobs");
    let response = post(server.addr, "/v1/chat/completions", &bare)?.json()?;
    assert!(response["choices"][0]["logprobs"].is_null(), "{response}");
    Ok(())
}

#[test]
fn echoed_prompts_are_scored_and_completions_list_their_tokens() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |_| {})?;
    let model = &server.model;
    let prompt_text = "the cat sat on the mat";
    let prompt = completion_tokens(model, prompt_text);
    let mut session = model.session()?;
    let all = session.logits_all(&prompt)?;
    let vocab = model.config().vocab_size;
    let rows: Vec<Position> = logits_slice(&all)?
        .chunks_exact(vocab)
        .map(Position::new)
        .collect();

    // Scoring only (`max_tokens: 0`, as evaluation harnesses ask): the prompt echoed,
    // its first token with nulls, each later one scored by the position before it.
    let body = json!({"prompt": prompt_text, "max_tokens": 0, "echo": true, "logprobs": 3});
    let reply = post(server.addr, "/v1/completions", &body)?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let response = reply.json()?;
    let choice = &response["choices"][0];
    assert_eq!(choice["text"], prompt_text);
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(response["usage"]["completion_tokens"], 0);
    let lp = &choice["logprobs"];
    let tokens = lp["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), prompt.len(), "{lp}");
    assert!(
        lp["token_logprobs"][0].is_null() && lp["top_logprobs"][0].is_null(),
        "{lp}"
    );
    for i in 1..prompt.len() {
        let position = &rows[i - 1];
        let id = prompt[i];
        assert_eq!(tokens[i], completion_text(model, id).as_str());
        assert!(
            close(&lp["token_logprobs"][i], position.logprobs[id as usize]),
            "{i}: {lp}"
        );
        let top = lp["top_logprobs"][i].as_object().expect("top");
        assert_eq!(top.len(), 3, "{i}: {lp}");
        for id in position.top(3) {
            let text = completion_text(model, id);
            let got = top.get(&text).unwrap_or(&Value::Null);
            assert!(
                close(got, position.logprobs[id as usize]),
                "{i}: token {id} {text:?} {}: {lp}",
                position.logprobs[id as usize]
            );
        }
    }
    let offsets: Vec<u64> = lp["text_offset"]
        .as_array()
        .expect("offsets")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{offsets:?}");

    // Echo and generation, streamed and not: the prompt first, then the greedy tokens
    // scored as the chat ones are; the generated text starts at the prompt's length.
    let reference = greedy_positions(model, &prompt, 4)?;
    let body = json!({"prompt": prompt_text, "max_tokens": 4, "echo": true, "logprobs": 2,
                      "temperature": 0, "ignore_eos": true});
    let response = post(server.addr, "/v1/completions", &body)?.json()?;
    let choice = &response["choices"][0];
    let text = choice["text"].as_str().expect("text");
    assert!(text.starts_with(prompt_text), "{text:?}");
    let lp = &choice["logprobs"];
    assert_eq!(
        lp["tokens"].as_array().map(Vec::len),
        Some(prompt.len() + 4)
    );
    for (j, position) in reference.iter().enumerate() {
        let i = prompt.len() + j;
        let id = position.argmax;
        assert_eq!(lp["tokens"][i], completion_text(model, id).as_str(), "{lp}");
        assert!(
            close(&lp["token_logprobs"][i], position.logprobs[id as usize]),
            "{lp}"
        );
    }
    assert_eq!(
        lp["text_offset"][prompt.len()],
        prompt_text.chars().count(),
        "{lp}"
    );
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let reply = post(server.addr, "/v1/completions", &streamed)?;
    let (mut text_s, mut tokens_s, mut logprobs_s) = (String::new(), Vec::new(), Vec::new());
    for data in reply.sse_data() {
        if data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&data)?;
        let choice = &chunk["choices"][0];
        text_s.push_str(choice["text"].as_str().unwrap_or(""));
        if let Some(t) = choice["logprobs"]["tokens"].as_array() {
            tokens_s.extend(t.iter().cloned());
            logprobs_s.extend(
                choice["logprobs"]["token_logprobs"]
                    .as_array()
                    .expect("lp")
                    .iter()
                    .cloned(),
            );
        }
    }
    assert_eq!(text_s, text);
    assert_eq!(&tokens_s, lp["tokens"].as_array().expect("tokens"));
    assert_eq!(&logprobs_s, lp["token_logprobs"].as_array().expect("lp"));
    Ok(())
}

#[test]
fn logit_bias_steers_greedy_decoding() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |_| {})?;
    let model = &server.model;
    let prompt_text = "once upon a time";
    let prompt = completion_tokens(model, prompt_text);
    let first = greedy_positions(model, &prompt, 1)?.remove(0);
    let ask = |bias: Value| -> anyhow::Result<Value> {
        let body = json!({"prompt": prompt_text, "max_tokens": 3, "temperature": 0,
                          "ignore_eos": true, "logprobs": 0, "logit_bias": bias});
        let reply = post(server.addr, "/v1/completions", &body)?;
        anyhow::ensure!(reply.status == 200, "{}", reply.body);
        Ok(reply.json()?["choices"][0]["logprobs"]["tokens"].clone())
    };
    // Banning the greedy choice gives the runner-up; the reported log-probability stays
    // the raw model's.
    let runner_up = first.top(2)[1];
    let tokens = ask(json!({ first.argmax.to_string(): -100 }))?;
    assert_eq!(
        tokens[0],
        completion_text(model, runner_up).as_str(),
        "{tokens}"
    );
    // A large bias forces an unlikely token at every step.
    let unlikely = first
        .top(model.config().vocab_size)
        .last()
        .copied()
        .expect("token");
    let tokens = ask(json!({ unlikely.to_string(): 100 }))?;
    let text = completion_text(model, unlikely);
    assert_eq!(tokens, json!([text, text, text]));
    Ok(())
}

#[test]
fn bad_logprobs_and_bias_fields_are_named() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |_| {})?;
    let chat = |extra: Value| {
        let mut body = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        post(server.addr, "/v1/chat/completions", &body)
    };
    let completion = |extra: Value| {
        let mut body = json!({"prompt": "hi", "max_tokens": 2});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        post(server.addr, "/v1/completions", &body)
    };
    let cases = [
        (
            chat(json!({"logprobs": true, "top_logprobs": 21}))?,
            "top_logprobs",
        ),
        (chat(json!({"top_logprobs": 2}))?, "top_logprobs"),
        (chat(json!({"logprobs": 3}))?, "logprobs"),
        (chat(json!({"echo": true}))?, "echo"),
        (completion(json!({"logprobs": 21}))?, "logprobs"),
        (completion(json!({"logprobs": true}))?, "logprobs"),
        (completion(json!({"top_logprobs": 3}))?, "top_logprobs"),
        (completion(json!({"logit_bias": {"400": 1}}))?, "logit_bias"),
        (completion(json!({"logit_bias": {"abc": 1}}))?, "logit_bias"),
        (completion(json!({"logit_bias": {"3": 101}}))?, "logit_bias"),
        (
            completion(json!({"logit_bias": {"3": 1, "03": 2}}))?,
            "logit_bias",
        ),
        (completion(json!({"max_tokens": 0}))?, "max_tokens"),
    ];
    for (reply, param) in cases {
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_eq!(reply.json()?["error"]["param"], param, "{}", reply.body);
    }
    // The server goes on serving.
    let reply = completion(json!({"logit_bias": {"399": -100}}))?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    Ok(())
}
