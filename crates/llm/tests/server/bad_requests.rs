//! Every kind of bad request gets a 4xx with an OpenAI-style JSON error, and the server
//! keeps serving.

use serde_json::json;

use crate::fixtures::{SMALL, load, model_file, start};
use crate::http_client::{post, request};

/// Checks an OpenAI-style error: status, type, param.
fn assert_error(
    reply: &crate::http_client::Reply,
    status: u16,
    param: Option<&str>,
    needle: &str,
) -> anyhow::Result<serde_json::Value> {
    assert_eq!(reply.status, status, "{}", reply.body);
    let body = reply.json()?;
    let error = &body["error"];
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains(needle)),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert!(error.get("code").is_some(), "{body}");
    match param {
        Some(p) => assert_eq!(error["param"], p, "{body}"),
        None => assert!(error["param"].is_null(), "{body}"),
    }
    Ok(body)
}

#[test]
fn bad_requests_get_openai_errors() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| c.max_body_bytes = 2048)?;
    let addr = server.addr;
    let completions = "/v1/completions";

    let r = request(addr, "POST", completions, Some("{\"prompt\": \"hi\""))?;
    assert_error(&r, 400, None, "malformed JSON")?;
    let r = request(
        addr,
        "POST",
        completions,
        Some("{\"prompt\": \"hi\"} trailing"),
    )?;
    assert_error(&r, 400, None, "malformed JSON")?;
    let r = request(addr, "POST", completions, Some("42"))?;
    assert_error(&r, 400, None, "bad request body")?;
    let r = post(
        addr,
        completions,
        &json!({"prompt": "hi", "max_tokens": "ten"}),
    )?;
    assert_error(&r, 400, Some("max_tokens"), "invalid type")?;
    let r = post(
        addr,
        completions,
        &json!({"prompt": "hi", "temperature": [1]}),
    )?;
    assert_error(&r, 400, Some("temperature"), "invalid type")?;
    let r = post(addr, completions, &json!({"prompt": "hi", "stream": "yes"}))?;
    assert_error(&r, 400, Some("stream"), "invalid type")?;
    let r = post(addr, completions, &json!({"prompt": 5}))?;
    assert_error(&r, 400, Some("prompt"), "prompt")?;
    let r = post(addr, completions, &json!({"max_tokens": 3}))?;
    assert_error(&r, 400, Some("prompt"), "required")?;
    let r = post(addr, completions, &json!({"prompt": []}))?;
    assert_error(&r, 400, Some("prompt"), "at least one prompt")?;
    let r = post(addr, completions, &json!({"prompt": [[1, 2], [3, 400]]}))?;
    assert_error(&r, 400, Some("prompt[1]"), "out of range")?;
    let r = post(addr, completions, &json!({"prompt": [1, 2, 100000]}))?;
    assert_error(&r, 400, Some("prompt"), "out of range")?;
    let r = post(addr, completions, &json!({"prompt": "hi", "max_tokens": 0}))?;
    assert_error(&r, 400, Some("max_tokens"), "at least 1")?;
    let r = post(
        addr,
        completions,
        &json!({"prompt": "hi", "max_tokens": -4}),
    )?;
    assert_error(&r, 400, Some("max_tokens"), "at least 1")?;
    let r = post(addr, completions, &json!({"prompt": "hi", "n": 0}))?;
    assert_error(&r, 400, Some("n"), "at least 1")?;
    let r = post(addr, completions, &json!({"prompt": "hi", "n": 9}))?;
    assert_error(&r, 400, Some("n"), "slots")?;
    let many: Vec<&str> = vec!["a"; 200];
    let r = post(addr, completions, &json!({"prompt": many}))?;
    assert_error(&r, 400, Some("prompt"), "choices")?;
    let r = post(
        addr,
        completions,
        &json!({"prompt": "hi", "temperature": 7}),
    )?;
    assert_error(&r, 400, Some("temperature"), "between 0 and 2")?;
    let r = post(addr, completions, &json!({"prompt": "hi", "top_p": 0}))?;
    assert_error(&r, 400, Some("top_p"), "top_p")?;
    let r = post(
        addr,
        completions,
        &json!({"prompt": "hi", "presence_penalty": 9}),
    )?;
    assert_error(&r, 400, Some("presence_penalty"), "between -2 and 2")?;
    // 64 positions: a 64-token prompt leaves no room.
    let long: Vec<u32> = vec![300; 64];
    let r = post(addr, completions, &json!({"prompt": long}))?;
    let body = assert_error(&r, 400, Some("prompt"), "the context holds 64")?;
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let r = post(addr, completions, &json!({"prompt": "x".repeat(4000)}))?;
    let body = assert_error(&r, 413, None, "larger than 2048 bytes")?;
    assert_eq!(body["error"]["code"], "request_too_large");

    let chat = "/v1/chat/completions";
    let r = post(addr, chat, &json!({"prompt": "hi"}))?;
    assert_error(&r, 400, Some("messages"), "required")?;
    let r = post(addr, chat, &json!({"messages": []}))?;
    assert_error(&r, 400, Some("messages"), "at least one")?;
    let r = post(addr, chat, &json!({"messages": [{"content": "no role"}]}))?;
    assert_error(&r, 400, Some("messages[0]"), "role")?;
    let r = post(
        addr,
        chat,
        &json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}),
    )?;
    assert_error(&r, 400, Some("messages[0].content"), "not supported")?;

    let r = request(addr, "GET", "/v1/nothing", None)?;
    assert_error(&r, 404, None, "no such endpoint")?;
    let r = request(addr, "GET", completions, None)?;
    assert_error(&r, 405, None, "method not allowed")?;

    // Still serving.
    let r = post(
        addr,
        completions,
        &json!({"prompt": "hi", "max_tokens": 2, "ignore_eos": true}),
    )?;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()?["usage"]["completion_tokens"], 2);
    Ok(())
}

#[test]
fn chat_template_errors_are_bad_requests() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.chat_template = Some(
            "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}{{ m.content }}{% endfor %}"
                .into(),
        );
    })?;
    let r = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "x"}]}),
    )?;
    assert_error(&r, 400, Some("messages"), "no tools here")?;
    Ok(())
}
