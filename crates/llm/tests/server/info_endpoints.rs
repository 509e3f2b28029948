//! llama-server's utility endpoints: `/tokenize`, `/detokenize`, `/apply-template`,
//! `/props` and `/slots`, against the engine's own tokenizer and template.

use serde_json::{Value, json};
use tempra_llm::chat::ChatMessage;
use tempra_llm::tokenizer::TokenizeOptions;

use crate::fixtures::{LONG_CONTEXT, SMALL, TEMPLATE, load, long_stream, model_file, start};
use crate::http_client::{get, post};

#[test]
fn tokenize_detokenize_and_apply_template_match_the_engine() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |_| {})?;
    let vocab = server.model.vocab();
    let text = "the cat sat on the mat";
    let want = |add_special, parse_special| {
        vocab.tokenize(
            text,
            TokenizeOptions {
                add_special,
                parse_special,
            },
        )
    };

    // llama-server's defaults: no BOS, control-token text parsed.
    let reply = post(server.addr, "/tokenize", &json!({"content": text}))?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()?["tokens"], json!(want(false, true)));
    let reply = post(
        server.addr,
        "/tokenize",
        &json!({"content": text, "add_special": true, "with_pieces": true}),
    )?;
    let pieces = reply.json()?["tokens"].clone();
    let ids: Vec<u32> = pieces
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["id"].as_u64().map(|id| id as u32))
        .collect();
    assert_eq!(ids, want(true, true));
    for (p, &id) in pieces.as_array().expect("list").iter().zip(&ids) {
        let bytes = vocab.token_piece(id, true)?;
        match std::str::from_utf8(&bytes) {
            Ok(s) => assert_eq!(p["piece"], s, "{p}"),
            Err(_) => assert_eq!(p["piece"], json!(bytes), "{p}"),
        }
    }

    // Back to the text.
    let reply = post(
        server.addr,
        "/detokenize",
        &json!({"tokens": want(false, true)}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let back = reply.json()?["content"].clone();
    assert_eq!(back.as_str().map(str::trim_start), Some(text));
    let reply = post(server.addr, "/detokenize", &json!({"tokens": [1, 400]}))?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()?["error"]["param"], "tokens[1]");

    // The template's rendering, as a chat request would be prompted.
    let messages = json!([{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": "Hello <|assistant|> there"}]);
    let reply = post(
        server.addr,
        "/apply-template",
        &json!({"messages": messages}),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let template = tempra_llm::chat::ChatTemplate::new(TEMPLATE, "<s>", "</s>")?;
    let expected = template.render(
        &[
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", "Hello <|assistant|> there"),
        ],
        true,
    )?;
    assert_eq!(reply.json()?["prompt"], expected.as_str());
    let reply = post(
        server.addr,
        "/apply-template",
        &json!({"messages": [{"role": "wizard", "content": "x"}]}),
    )?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()?["error"]["param"], "messages[0].role");
    let reply = post(server.addr, "/tokenize", &json!({"content": 5}))?;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.json()?["error"]["param"], "content");
    Ok(())
}

#[test]
fn props_and_slots_describe_the_server() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 512)?, |c| c.slots = 2)?;
    let props = get(server.addr, "/props")?.json()?;
    assert_eq!(props["total_slots"], 2);
    assert_eq!(props["n_ctx"], 512);
    assert_eq!(props["chat_template"], TEMPLATE);
    assert_eq!(props["default_generation_settings"]["params"]["top_k"], 40);

    let idle = |slots: &Value| {
        slots
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["is_processing"] == false))
    };
    let slots = get(server.addr, "/slots")?.json()?;
    assert_eq!(slots.as_array().map(Vec::len), Some(2), "{slots}");
    assert!(idle(&slots), "{slots}");

    // A stream running: one slot busy with its prompt and tokens.
    let stream = long_stream(server.addr, &[], true)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let busy = loop {
        let slots = get(server.addr, "/slots")?.json()?;
        let busy: Vec<Value> = slots
            .as_array()
            .expect("list")
            .iter()
            .filter(|s| s["is_processing"] == true)
            .cloned()
            .collect();
        if busy.len() == 1 && busy[0]["n_decoded"].as_u64() > Some(1) {
            break busy[0].clone();
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "{slots}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(busy["n_prompt_tokens"].as_u64() > Some(0), "{busy}");
    assert_eq!(busy["n_ctx"], 512);
    assert!(
        busy["n_cached_tokens"].as_u64() >= busy["n_prompt_tokens"].as_u64(),
        "{busy}"
    );
    // The client leaves: the slot frees and keeps its tokens cached.
    drop(stream);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let slots = get(server.addr, "/slots")?.json()?;
        if idle(&slots) {
            let id = busy["id"].as_u64().expect("id") as usize;
            assert!(slots[id]["n_cached_tokens"].as_u64() > Some(0), "{slots}");
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "{slots}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(())
}
