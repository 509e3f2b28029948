//! Templates with tools render exactly as transformers' `apply_chat_template(...,
//! tools=...)` does: the goldens in `tests/data/chat_templates/tool_goldens.json` were
//! rendered by `make_tool_goldens.py` with transformers' own `render_jinja_template`
//! for Qwen 2.5, Qwen 3, Llama 3.1, Mistral Nemo, Hermes 2 Pro and gpt-oss (tool definitions,
//! tool calls, tool results, parallel calls, reasoning, `enable_thinking` and other
//! keyword arguments); where the template raises, so must tempra, with one difference:
//! minijinja iterates `none` as an empty list where Jinja2 raises "'NoneType' object is
//! not iterable" (Hermes 2 Pro's template without tools), so tempra renders those.
#![cfg(feature = "chat")]

use std::path::PathBuf;

use tempra_llm::chat::{ChatMessage, ChatTemplate, TemplateInputs, ToolCall};
use tempra_llm::json::JsonValue;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/chat_templates")
        .join(name)
}

/// A golden message as a `ChatMessage` (as the server builds them from a request).
fn message(m: &JsonValue) -> ChatMessage {
    let text = |k: &str| m.get(k).and_then(JsonValue::as_str).map(str::to_owned);
    let mut msg = ChatMessage::new(text("role").unwrap(), text("content").unwrap_or_default());
    if let Some(id) = text("tool_call_id") {
        msg = msg.with_tool_call_id(id);
    }
    if let Some(r) = text("reasoning_content") {
        msg = msg.with_reasoning(r);
    }
    if let Some(calls) = m.get("tool_calls").and_then(JsonValue::as_array) {
        let calls = calls
            .iter()
            .map(|c| {
                let f = c.get("function").unwrap();
                ToolCall {
                    id: c.get("id").and_then(JsonValue::as_str).unwrap().to_owned(),
                    name: f
                        .get("name")
                        .and_then(JsonValue::as_str)
                        .unwrap()
                        .to_owned(),
                    arguments: f.get("arguments").unwrap().clone(),
                }
            })
            .collect();
        msg = msg.with_tool_calls(calls);
    }
    msg
}

/// `text` with the date of gpt-oss's `Current date: YYYY-MM-DD` line (its template's
/// `strftime_now`, today's date here, 2025-01-01 in the goldens) masked.
fn mask_date(text: &str) -> String {
    const LINE: &str = "Current date: ";
    match text.find(LINE) {
        Some(at) => {
            let date = at + LINE.len();
            let end = (date + "YYYY-MM-DD".len()).min(text.len());
            format!("{}YYYY-MM-DD{}", &text[..date], &text[end..])
        }
        None => text.to_owned(),
    }
}

#[test]
fn tool_templates_render_as_transformers_does() {
    let goldens =
        JsonValue::parse(&std::fs::read_to_string(data("tool_goldens.json")).unwrap()).unwrap();
    let cases = goldens.get("cases").and_then(JsonValue::as_array).unwrap();
    assert!(cases.len() >= 45, "{} cases", cases.len());
    let mut compared = 0;
    for case in cases {
        let s = |k: &str| case.get(k).and_then(JsonValue::as_str).unwrap();
        let file = s("template");
        let name = s("case");
        let source = std::fs::read_to_string(data(file)).unwrap();
        let template = ChatTemplate::new(
            source.trim_end_matches('\n'),
            s("bos_token"),
            s("eos_token"),
        )
        .unwrap();
        let messages: Vec<ChatMessage> = case
            .get("messages")
            .and_then(JsonValue::as_array)
            .unwrap()
            .iter()
            .map(message)
            .collect();
        let inputs = TemplateInputs {
            tools: case
                .get("tools")
                .and_then(JsonValue::as_array)
                .map(<[JsonValue]>::to_vec),
            kwargs: case
                .get("kwargs")
                .and_then(JsonValue::as_object)
                .unwrap()
                .to_vec(),
        };
        let add = case
            .get("add_generation_prompt")
            .and_then(JsonValue::as_bool)
            .unwrap();
        let got = template
            .render_with(&messages, &inputs, add)
            .map(|g| mask_date(&g));
        let rendered = case
            .get("rendered")
            .and_then(JsonValue::as_str)
            .map(mask_date);
        match (rendered.as_deref(), got) {
            (Some(want), Ok(got)) => {
                if want != got {
                    let at = want
                        .bytes()
                        .zip(got.bytes())
                        .take_while(|(a, b)| a == b)
                        .count();
                    panic!(
                        "{file} / {name}: differs at byte {at}:\nwant …{:?}\ngot  …{:?}",
                        &want[at.saturating_sub(40)..(at + 80).min(want.len())],
                        &got[at.saturating_sub(40)..(at + 80).min(got.len())]
                    );
                }
                compared += 1;
            }
            (None, Err(_)) => compared += 1,
            (Some(_), Err(e)) => panic!("{file} / {name}: tempra failed: {e}"),
            (None, Ok(_)) if s("error") == "'NoneType' object is not iterable" => compared += 1,
            (None, Ok(got)) => panic!(
                "{file} / {name}: transformers raised {:?}, tempra rendered {got:?}",
                s("error")
            ),
        }
    }
    assert_eq!(compared, cases.len());
}
