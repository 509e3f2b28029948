//! Completions and chat, streamed and not; models, health and metrics.

use serde_json::json;
use tempra_llm::chat::ChatMessage;

use crate::fixtures::{
    SMALL, chat_tokens, completion_tokens, load, metric, model_file, reference, start, wait_health,
};
use crate::http_client::{get, post};

#[test]
fn completion_matches_the_engine_and_reports_usage() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |_| {})?;
    let prompt = "the cat sat on";
    let expected = reference(&server.model, &completion_tokens(&server.model, prompt), 12)?;
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"model": "gpt-4", "prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": true}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json()?;
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["model"], "tiny-model");
    assert!(
        body["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("cmpl-"))
    );
    assert_eq!(body["choices"][0]["text"], expected.as_str());
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    let n_prompt = completion_tokens(&server.model, prompt).len() as u64;
    assert_eq!(body["usage"]["prompt_tokens"], n_prompt);
    assert_eq!(body["usage"]["completion_tokens"], 12);
    assert_eq!(body["usage"]["total_tokens"], n_prompt + 12);

    // The same as a stream: the chunks add up to the same text, then [DONE].
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": true, "stream": true,
                "stream_options": {"include_usage": true}}),
    )?;
    assert_eq!(reply.status, 200);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    );
    let data = reply.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<serde_json::Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d))
        .collect::<Result<_, _>>()?;
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, expected);
    let finish: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["length"]);
    let usage = &chunks.last().expect("usage chunk")["usage"];
    assert_eq!(usage["completion_tokens"], 12);
    assert!(chunks.iter().all(|c| c["object"] == "text_completion"));
    Ok(())
}

#[test]
fn chat_uses_the_template_streamed_or_not() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |_| {})?;
    let messages = [
        ChatMessage::new("system", "be kind"),
        ChatMessage::new("user", "hello there"),
    ];
    let expected = reference(&server.model, &chat_tokens(&server.model, &messages)?, 10)?;
    let request = json!({
        "model": "anything",
        "messages": [{"role": "system", "content": "be kind"},
                     {"role": "user", "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]}],
        "max_tokens": 10, "temperature": 0, "ignore_eos": true,
    });
    let reply = post(server.addr, "/v1/chat/completions", &request)?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json()?;
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], expected.as_str());
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(body["usage"]["completion_tokens"], 10);

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let reply = post(server.addr, "/v1/chat/completions", &streamed)?;
    assert_eq!(reply.status, 200);
    let data = reply.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<serde_json::Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d))
        .collect::<Result<_, _>>()?;
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, expected);
    assert_eq!(
        chunks.last().expect("last")["choices"][0]["finish_reason"],
        "length"
    );
    Ok(())
}

#[test]
fn stop_strings_and_max_tokens_end_the_generation() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |_| {})?;
    let prompt = "once upon";
    let full = reference(&server.model, &completion_tokens(&server.model, prompt), 24)?;
    // Stop at a piece of the text the model is known to produce.
    let chars: Vec<char> = full.chars().collect();
    assert!(chars.len() >= 6, "reference too short: {full:?}");
    let stop: String = chars[3..5].iter().collect();
    let cut = &full[..full.find(&stop).expect("stop in text")];
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": prompt, "max_tokens": 24, "temperature": 0, "ignore_eos": true, "stop": [stop, "\u{1}never"]}),
    )?;
    let body = reply.json()?;
    assert_eq!(body["choices"][0]["text"], cut, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    Ok(())
}

#[test]
fn models_health_and_metrics() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |c| c.slots = 2)?;
    let models = get(server.addr, "/v1/models")?;
    assert_eq!(models.status, 200);
    let models = models.json()?;
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "tiny-model");
    assert_eq!(models["data"][0]["object"], "model");

    let health = get(server.addr, "/health")?.json()?;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["slots_idle"], 2);
    assert_eq!(health["slots_processing"], 0);

    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": "abc", "max_tokens": 5, "temperature": 0, "ignore_eos": true}),
    )?;
    assert_eq!(reply.status, 200);
    let bad = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": "abc", "n": 3}),
    )?;
    assert_eq!(bad.status, 400);
    // The engine frees the slot just after it sends the end.
    wait_health(server.addr, |h| h["slots_processing"] == 0)?;
    let metrics = get(server.addr, "/metrics")?;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/plain"))
    );
    let text = &metrics.body;
    assert_eq!(
        metric(text, "tempra_requests_total{endpoint=\"completions\"}"),
        Some(2.0)
    );
    assert_eq!(metric(text, "tempra_requests_invalid_total"), Some(1.0));
    assert_eq!(metric(text, "tempra_completion_tokens_total"), Some(5.0));
    assert_eq!(metric(text, "tempra_slots"), Some(2.0));
    assert_eq!(metric(text, "tempra_slots_busy"), Some(0.0));
    assert!(metric(text, "tempra_decode_steps_total").is_some_and(|s| s >= 4.0));
    assert!(metric(text, "tempra_decode_tokens_per_second").is_some_and(|s| s > 0.0));
    assert!(metric(text, "tempra_pool_hits_total").is_some());
    assert!(text.contains("# TYPE tempra_requests_total counter"));
    Ok(())
}
