//! `n` continuations per prompt and several prompts per completions request: each
//! choice equals a request of its own (continuation j of a request with seed s draws as
//! a request with seed s + j does), the continuations of a prompt share one prefill (the
//! others fork its KV cache), and more choices than slots run in turn.

use serde_json::{Value, json};

use crate::fixtures::{LONG_CONTEXT, load, metric, model_file, start};
use crate::http_client::{get, post};

/// The choices' texts and finish reasons, by index.
fn choices(response: &Value) -> Vec<(String, String)> {
    let mut list: Vec<&Value> = response["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .collect();
    list.sort_by_key(|c| c["index"].as_u64());
    list.iter()
        .map(|c| {
            (
                c["text"].as_str().expect("text").to_owned(),
                c["finish_reason"].as_str().expect("finish").to_owned(),
            )
        })
        .collect()
}

#[test]
fn n_continuations_equal_requests_with_the_derived_seeds() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 256)?, |c| c.slots = 3)?;
    let body = |n: usize, seed: u64| {
        json!({"prompt": "the cat sat on the", "max_tokens": 12, "temperature": 1.0,
               "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": seed, "n": n,
               "ignore_eos": true})
    };
    let metrics_before = get(server.addr, "/metrics")?.body;
    let reply = post(server.addr, "/v1/completions", &body(3, 70))?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let response = reply.json()?;
    let got = choices(&response);
    assert_eq!(got.len(), 3, "{response}");
    // One prefill for the three.
    let prompt_tokens = response["usage"]["prompt_tokens"].as_u64().expect("usage");
    assert_eq!(response["usage"]["completion_tokens"], 36);
    let metrics_after = get(server.addr, "/metrics")?.body;
    let prefilled = metric(&metrics_after, "tempra_prompt_tokens_total").unwrap_or(0.0)
        - metric(&metrics_before, "tempra_prompt_tokens_total").unwrap_or(0.0);
    assert_eq!(prefilled, prompt_tokens as f64);

    let mut separate = Vec::new();
    for j in 0..3 {
        let reply = post(server.addr, "/v1/completions", &body(1, 70 + j))?;
        separate.push(choices(&reply.json()?).remove(0));
    }
    assert_eq!(got, separate);
    assert!(
        got[0].0 != got[1].0 || got[1].0 != got[2].0,
        "temperature 1 gave three identical texts: {got:?}"
    );

    // Streamed: each index's chunks add up to its choice, then one [DONE].
    let mut streamed = body(3, 70);
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let reply = post(server.addr, "/v1/completions", &streamed)?;
    let data = reply.sse_data();
    assert_eq!(data.iter().filter(|d| *d == "[DONE]").count(), 1);
    let mut texts = vec![String::new(); 3];
    let mut finishes = vec![String::new(); 3];
    let mut usage = Value::Null;
    for d in data.iter().filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(d)?;
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
        for c in chunk["choices"].as_array().expect("choices") {
            let i = c["index"].as_u64().expect("index") as usize;
            texts[i].push_str(c["text"].as_str().unwrap_or(""));
            if let Some(f) = c["finish_reason"].as_str() {
                finishes[i] = f.to_owned();
            }
        }
    }
    let streamed: Vec<(String, String)> = texts.into_iter().zip(finishes).collect();
    assert_eq!(streamed, got);
    assert_eq!(usage["completion_tokens"], 36);
    Ok(())
}

#[test]
fn several_prompts_give_their_choices_in_order() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 256)?, |c| c.slots = 3)?;
    let prompts = ["once upon a time", "the dog ran", "in the park"];
    let greedy = |prompt: Value, n: usize| json!({"prompt": prompt, "max_tokens": 6, "temperature": 0, "n": n, "ignore_eos": true});
    // Three prompts with n = 2: six choices on three slots, a prompt's pair at a time.
    let reply = post(server.addr, "/v1/completions", &greedy(json!(prompts), 2))?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let response = reply.json()?;
    let got = choices(&response);
    assert_eq!(got.len(), 6, "{response}");
    let mut prompt_tokens = 0;
    for (p, prompt) in prompts.iter().enumerate() {
        let alone = post(server.addr, "/v1/completions", &greedy(json!(prompt), 1))?.json()?;
        prompt_tokens += alone["usage"]["prompt_tokens"].as_u64().expect("usage");
        let want = choices(&alone).remove(0);
        assert_eq!(got[2 * p], want, "prompt {p}");
        assert_eq!(got[2 * p + 1], want, "prompt {p}, greedy twice");
    }
    assert_eq!(response["usage"]["prompt_tokens"], prompt_tokens);
    assert_eq!(response["usage"]["completion_tokens"], 36);

    // Token-id prompts, echoed.
    let ids = [[1u32, 20, 30], [1, 40, 50]];
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": ids, "max_tokens": 2, "temperature": 0, "echo": true}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(choices(&reply.json()?).len(), 2);
    Ok(())
}

#[test]
fn chat_n_gives_n_messages() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 256)?, |c| c.slots = 2)?;
    let reply = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5,
                "n": 2, "seed": 3, "temperature": 1.0, "ignore_eos": true,
                "logprobs": true}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let response = reply.json()?;
    let list = response["choices"].as_array().expect("choices");
    assert_eq!(list.len(), 2, "{response}");
    for (i, c) in list.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["message"]["role"], "assistant");
        assert_eq!(c["logprobs"]["content"].as_array().map(Vec::len), Some(5));
    }
    Ok(())
}
