//! Structured output through the server: `response_format` (JSON schema, JSON object),
//! `grammar`, tools with `tool_choice` (required, named, auto) in the Hermes (ChatML
//! fallback), Mistral and harmony (gpt-oss) formats, reasoning split from content, streamed and not, and a
//! 400 naming the field for every kind of bad input.

use serde_json::{Value, json};

use crate::fixtures::{LONG_CONTEXT, SMALL, load, model_file, start};
use crate::http_client::{Reply, post};

fn chat(addr: std::net::SocketAddr, body: &Value) -> anyhow::Result<Reply> {
    post(addr, "/v1/chat/completions", body)
}

/// The chunks of a streamed reply, as JSON.
fn chunks(reply: &Reply) -> Vec<Value> {
    reply
        .sse_data()
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("chunk JSON"))
        .collect()
}

const PERSON: &str = r#"{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}, "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"], "additionalProperties": false}}, "required": ["name", "age", "tags", "address"], "additionalProperties": false}"#;

fn check_person(v: &Value) {
    assert!(v["name"].is_string(), "{v}");
    assert!(v["age"].as_u64().is_some_and(|a| a <= 120), "{v}");
    let tags = v["tags"].as_array().expect("tags");
    assert!(
        tags.len() <= 3
            && tags
                .iter()
                .all(|t| ["a", "b", "c"].contains(&t.as_str().unwrap_or(""))),
        "{v}"
    );
    assert!(
        v["address"]["city"]
            .as_str()
            .is_some_and(|c| c.chars().count() <= 12),
        "{v}"
    );
    assert_eq!(v.as_object().map(|o| o.len()), Some(4), "{v}");
}

#[test]
fn json_schema_replies_parse_however_short_max_tokens_is() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 256)?, |_| {})?;
    let schema: Value = serde_json::from_str(PERSON)?;
    let format = json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": true}});
    let messages = json!([{"role": "user", "content": "Describe someone."}]);
    // The shortest reply: {"name":"","age":0,"tags":[],"address":{"city":""}} and the end.
    for (seed, max_tokens) in [(1, 52), (2, 60), (3, 90), (4, 200)] {
        let body = json!({"messages": messages, "response_format": format, "seed": seed,
                          "max_tokens": max_tokens, "temperature": 1.2});
        let r = chat(server.addr, &body)?;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json()?;
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        let content = v["choices"][0]["message"]["content"]
            .as_str()
            .expect("content");
        check_person(
            &serde_json::from_str(content).map_err(|e| anyhow::anyhow!("{e}: {content:?}"))?,
        );
        assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= max_tokens);
        // Streamed with the same seed: the same text.
        let mut stream = body.clone();
        stream["stream"] = json!(true);
        let r = chat(server.addr, &stream)?;
        let text: String = chunks(&r)
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(text, content, "seed {seed}");
    }
    // One token short of the shortest reply: refused before it runs.
    let body = json!({"messages": messages, "response_format": format, "max_tokens": 51});
    let r = chat(server.addr, &body)?;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()?["error"]["param"], "max_tokens");
    // json_object and llama-server's grammar field, on both endpoints.
    let r = chat(
        server.addr,
        &json!({"messages": messages, "response_format": {"type": "json_object"}, "max_tokens": 40, "seed": 5}),
    )?;
    let content = r.json()?["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        serde_json::from_str::<Value>(&content)?.is_object(),
        "{content}"
    );
    let grammar = "root ::= (\"yes\" | \"no\") \" because \" [a-z]{2,8} \".\"\n";
    for (path, body) in [
        (
            "/v1/completions",
            json!({"prompt": "Is it?", "grammar": grammar, "max_tokens": 30, "seed": 6}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": messages, "grammar": grammar, "max_tokens": 30, "seed": 6}),
        ),
    ] {
        let v = post(server.addr, path, &body)?.json()?;
        let text = v["choices"][0]["text"]
            .as_str()
            .or(v["choices"][0]["message"]["content"].as_str())
            .unwrap_or("");
        let (answer, rest) = text
            .split_once(" because ")
            .unwrap_or_else(|| panic!("{path}: {text:?}"));
        assert!(answer == "yes" || answer == "no", "{text:?}");
        assert!(
            rest.ends_with('.')
                && rest[..rest.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_lowercase()),
            "{text:?}"
        );
    }
    Ok(())
}

fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
          "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "search", "description": "Search the web",
          "parameters": {"type": "object",
          "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": false}}}
    ])
}

fn check_call(call: &Value, only: Option<&str>) {
    let name = call["function"]["name"].as_str().expect("name");
    if let Some(only) = only {
        assert_eq!(name, only);
    }
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments"))
            .unwrap_or_else(|e| panic!("{e}: {call}"));
    match name {
        "get_weather" => {
            assert!(
                args["city"]
                    .as_str()
                    .is_some_and(|c| c.chars().count() <= 20),
                "{args}"
            );
            assert!(args["unit"] == "c" || args["unit"] == "f", "{args}");
        }
        "search" => assert!(args["q"].is_string(), "{args}"),
        other => panic!("unknown function {other}"),
    }
    assert_eq!(call["type"], "function");
    assert!(
        call["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{call}"
    );
}

/// The tool calls a stream's deltas add up to (ids, names, arguments per index).
fn streamed_calls(r: &Reply) -> Vec<Value> {
    let mut calls: Vec<Value> = Vec::new();
    for c in chunks(r) {
        for d in c["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = d["index"].as_u64().expect("index") as usize;
            if i == calls.len() {
                assert!(
                    d["id"].is_string() && d["function"]["name"].is_string(),
                    "{d}"
                );
                calls.push(json!({"id": d["id"], "type": d["type"],
                                  "function": {"name": d["function"]["name"], "arguments": ""}}));
            }
            let sofar = calls[i]["function"]["arguments"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            calls[i]["function"]["arguments"] =
                json!(sofar + d["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    calls
}

#[test]
fn required_and_named_tool_choices_return_valid_calls() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let read = |name: &str| {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/chat_templates")
                .join(name),
        )
    };
    let (mistral, harmony) = (read("mistral-nemo.jinja")?, read("gpt-oss.jinja")?);
    for template in [None, Some(mistral), Some(harmony)] {
        let is_mistral = template
            .as_deref()
            .is_some_and(|t| t.contains("[TOOL_CALLS]"));
        let server = start(load(&dir, 2048)?, |c| {
            c.chat_template = template.map(|t| t.trim_end().to_owned())
        })?;
        let messages = json!([{"role": "user", "content": "Weather in Oslo?"}]);
        for (seed, choice) in [
            (1, json!("required")),
            (
                2,
                json!({"type": "function", "function": {"name": "search"}}),
            ),
            (3, json!("required")),
        ] {
            let named = choice["function"]["name"].as_str();
            let body = json!({"messages": messages, "tools": weather_tools(), "tool_choice": choice,
                              "seed": seed, "max_tokens": 120, "temperature": 1.0});
            let r = chat(server.addr, &body)?;
            assert_eq!(r.status, 200, "{}", r.body);
            let v = r.json()?;
            let choice0 = &v["choices"][0];
            assert_eq!(choice0["finish_reason"], "tool_calls", "{v}");
            let calls = choice0["message"]["tool_calls"]
                .as_array()
                .expect("tool_calls");
            assert!(!calls.is_empty());
            for call in calls {
                check_call(call, named);
                if is_mistral {
                    let id = call["id"].as_str().unwrap();
                    assert!(
                        id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
                        "{id}"
                    );
                }
            }
            assert!(choice0["message"]["content"].is_null(), "{v}");
            // Streamed: the same calls, delta by delta.
            let mut stream = body.clone();
            stream["stream"] = json!(true);
            let r = chat(server.addr, &stream)?;
            let last = chunks(&r)
                .into_iter()
                .rfind(|c| !c["choices"][0]["finish_reason"].is_null());
            assert_eq!(
                last.expect("finish chunk")["choices"][0]["finish_reason"],
                "tool_calls"
            );
            // (Each response has its own call ids.)
            let without_ids = |calls: &[Value]| -> Vec<Value> {
                calls
                    .iter()
                    .map(|c| json!({"type": c["type"], "function": c["function"]}))
                    .collect()
            };
            assert_eq!(
                without_ids(&streamed_calls(&r)),
                without_ids(calls),
                "seed {seed}"
            );
        }
        // The calls go back in the next turn with their results.
        let first = chat(
            server.addr,
            &json!({"messages": messages, "tools": weather_tools(),
            "tool_choice": "required", "seed": 9, "max_tokens": 120, "parallel_tool_calls": false}),
        )?
        .json()?;
        let calls = first["choices"][0]["message"]["tool_calls"].clone();
        assert_eq!(calls.as_array().map(Vec::len), Some(1), "{first}");
        let id = calls[0]["id"].as_str().unwrap().to_owned();
        let follow = json!({"messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": calls},
            {"role": "tool", "tool_call_id": id, "content": "{\"temp\": 3}"}],
            "tools": weather_tools(), "max_tokens": 5});
        let r = chat(server.addr, &follow)?;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    Ok(())
}

/// Harmony (gpt-oss's template): a JSON reply goes in the final channel after an
/// optional analysis message, and the response carries it as the content, the analysis
/// as the reasoning, streamed or not; the tool calls are checked with the other formats.
#[test]
fn harmony_json_replies_come_back_as_content() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let harmony = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/chat_templates/gpt-oss.jinja"),
    )?;
    let server = start(load(&dir, 2048)?, |c| {
        c.chat_template = Some(harmony.trim_end().to_owned())
    })?;
    let schema: Value = serde_json::from_str(PERSON)?;
    let format =
        json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema}});
    let messages = json!([{"role": "user", "content": "Describe someone."}]);
    for seed in 1..=3 {
        let body = json!({"messages": messages, "response_format": format, "seed": seed,
                          "max_tokens": 160, "temperature": 1.2});
        let r = chat(server.addr, &body)?;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json()?;
        let message = &v["choices"][0]["message"];
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        let content = message["content"].as_str().expect("content");
        assert!(!content.contains("<|"), "{content:?}");
        check_person(
            &serde_json::from_str(content).map_err(|e| anyhow::anyhow!("{e}: {content:?}"))?,
        );
        let mut stream = body.clone();
        stream["stream"] = json!(true);
        let r = chat(server.addr, &stream)?;
        let delta = |key: &str| -> String {
            chunks(&r)
                .iter()
                .filter_map(|c| c["choices"][0]["delta"][key].as_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(delta("content"), content, "seed {seed}");
        assert_eq!(
            delta("reasoning_content"),
            message["reasoning_content"].as_str().unwrap_or(""),
            "seed {seed}"
        );
    }
    Ok(())
}

#[test]
fn auto_tool_choice_and_reasoning_split_the_reply() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let qwen3 = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/chat_templates/qwen3.jinja"),
    )?;
    let server = start(load(&dir, 2048)?, |c| {
        c.chat_template = Some(qwen3.trim_end().to_owned())
    })?;
    let messages = json!([{"role": "user", "content": "Think, then answer."}]);
    // A grammar that makes the model think first: the reply splits.
    let grammar = "root ::= \"<think>\" [a-z]{3,6} \"</think>\" \"\\n\\n\" [a-z]{2,5}\n";
    let body = json!({"messages": messages, "grammar": grammar, "max_tokens": 40, "seed": 2});
    let v = chat(server.addr, &body)?.json()?;
    let m = &v["choices"][0]["message"];
    let (reasoning, content) = (
        m["reasoning_content"].as_str().expect("reasoning"),
        m["content"].as_str().expect("content"),
    );
    assert!(
        (3..=6).contains(&reasoning.len()) && (2..=5).contains(&content.len()),
        "{m}"
    );
    let mut stream = body.clone();
    stream["stream"] = json!(true);
    let cs = chunks(&chat(server.addr, &stream)?);
    let collect = |k: &str| -> String {
        cs.iter()
            .filter_map(|c| c["choices"][0]["delta"][k].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        (
            collect("reasoning_content").as_str(),
            collect("content").as_str()
        ),
        (reasoning, content)
    );
    // enable_thinking reaches the template (off: the prompt closes an empty block).
    let tokens = |on: bool| -> anyhow::Result<u64> {
        let v = chat(
            server.addr,
            &json!({"messages": messages, "max_tokens": 1, "enable_thinking": on}),
        )?
        .json()?;
        Ok(v["usage"]["prompt_tokens"].as_u64().unwrap_or(0))
    };
    assert!(tokens(false)? > tokens(true)?);
    let kwargs = chat(
        server.addr,
        &json!({"messages": messages, "max_tokens": 1,
                                            "chat_template_kwargs": {"enable_thinking": false}}),
    )?
    .json()?;
    assert_eq!(
        kwargs["usage"]["prompt_tokens"].as_u64().unwrap(),
        tokens(false)?
    );
    // tool_choice auto: free text unless the model opens a call; either way a valid reply.
    for seed in 0..4 {
        let r = chat(
            server.addr,
            &json!({"messages": messages, "tools": weather_tools(), "seed": seed,
                                           "max_tokens": 30, "temperature": 1.0}),
        )?;
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json()?;
        let calls = v["choices"][0]["message"]["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for call in &calls {
            check_call(call, None);
        }
    }
    Ok(())
}

#[test]
fn bad_structured_requests_name_the_field() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 1024)?, |c| c.chat_template = None)?;
    let user = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (
            json!({"messages": user, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": 5}}}}}}),
            "response_format.json_schema.schema.properties.a.type",
            "type name",
        ),
        (
            json!({"messages": user, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "multipleOf": 3}}}}),
            "response_format.json_schema.schema.multipleOf",
            "not supported",
        ),
        (
            json!({"messages": user, "response_format": {"type": "xml"}}),
            "response_format.type",
            "json_schema",
        ),
        (
            json!({"messages": user, "grammar": "root ::= \"a\"\nitem ::= [\n"}),
            "grammar",
            "grammar line 2, column 10",
        ),
        (
            json!({"messages": user, "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}),
            "response_format",
            "together",
        ),
        (
            json!({"messages": user, "json_schema": {"enum": []}}),
            "json_schema.enum",
            "at least one",
        ),
        (
            json!({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}]}),
            "messages[1].tool_call_id",
            "no earlier assistant message",
        ),
        (
            json!({"messages": [{"role": "tool", "content": "r"}]}),
            "messages[0].tool_call_id",
            "required",
        ),
        (
            json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}),
            "messages[0].tool_calls[0].function.arguments",
            "not JSON",
        ),
        (
            json!({"messages": user, "tools": weather_tools(), "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "tool_choice",
            "not one of the tools",
        ),
        (
            json!({"messages": user, "tools": weather_tools(), "tool_choice": "sometimes"}),
            "tool_choice",
            "auto, none, required",
        ),
        (
            json!({"messages": user, "tool_choice": "required"}),
            "tool_choice",
            "needs `tools`",
        ),
        (
            json!({"messages": user, "tools": [{"type": "function", "function": {"name": "bad name"}}]}),
            "tools[0].function.name",
            "64 letters",
        ),
        (
            json!({"messages": user, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"not": {}}}}}}]}),
            "tools[0].function.parameters.properties.x.not",
            "not supported",
        ),
        (
            json!({"messages": user, "tools": weather_tools(), "response_format": {"type": "json_object"}}),
            "response_format",
            "cannot be combined",
        ),
        (
            json!({"messages": user, "chat_template_kwargs": [1]}),
            "chat_template_kwargs",
            "object",
        ),
    ];
    for (body, param, needle) in cases {
        let r = chat(server.addr, &body)?;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let e = &r.json()?["error"];
        assert_eq!(e["param"], param, "{body}: {e}");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains(needle)),
            "{body}: {e}"
        );
    }
    // A template without a tool-call format refuses tools (the test template).
    let plain = start(load(&dir, 1024)?, |_| {})?;
    let r = chat(
        plain.addr,
        &json!({"messages": user, "tools": weather_tools(), "tool_choice": "required"}),
    )?;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()?["error"]["param"], "tools");
    // Still serving.
    let r = chat(server.addr, &json!({"messages": user, "max_tokens": 2}))?;
    assert_eq!(r.status, 200, "{}", r.body);
    Ok(())
}
