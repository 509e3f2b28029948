//! Slots: concurrency above the slot count, the queue and 429s, a client that
//! disconnects mid-stream, and the prompt cache.

use std::io::BufReader;
use std::net::Shutdown;

use serde_json::json;

use crate::fixtures::{
    LONG_CONTEXT, SMALL, completion_tokens, load, long_stream, metric, model_file, reference,
    start, wait_health,
};
use crate::http_client::{get, post, read_head, send};

#[test]
fn concurrent_requests_match_one_at_a_time() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |c| {
        c.slots = 3;
        c.queue = 8;
    })?;
    let prompts = [
        "a",
        "the dog ran far away",
        "once upon a time there was",
        "hello",
        "it is what it is and so it goes",
    ];
    let expected: Vec<String> = prompts
        .iter()
        .map(|p| reference(&server.model, &completion_tokens(&server.model, p), 16))
        .collect::<anyhow::Result<_>>()?;
    let addr = server.addr;
    let texts: Vec<anyhow::Result<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts
            .iter()
            .map(|p| {
                scope.spawn(move || -> anyhow::Result<String> {
                    let reply = post(
                        addr,
                        "/v1/completions",
                        &json!({"prompt": p, "max_tokens": 16, "temperature": 0, "ignore_eos": true}),
                    )?;
                    anyhow::ensure!(reply.status == 200, "{}", reply.body);
                    Ok(reply.json()?["choices"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    for (i, text) in texts.into_iter().enumerate() {
        assert_eq!(text?, expected[i], "prompt {:?}", prompts[i]);
    }
    wait_health(addr, |h| h["slots_processing"] == 0)?;
    let metrics = get(addr, "/metrics")?.body;
    assert_eq!(
        metric(&metrics, "tempra_completion_tokens_total"),
        Some(80.0)
    );
    Ok(())
}

#[test]
fn full_queue_gets_429_and_a_disconnect_frees_the_slot() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 4096)?, |c| {
        c.slots = 1;
        c.queue = 1;
    })?;
    let addr = server.addr;
    // A: a long stream; read until its first chunk so it holds the slot.
    let a = long_stream(addr, &[], true)?;
    // B waits in the queue.
    let short = json!({"prompt": "hi", "max_tokens": 3, "temperature": 0, "ignore_eos": true});
    let b = send(
        addr,
        "POST",
        "/v1/completions",
        Some(short.to_string().as_bytes()),
    )?;
    wait_health(addr, |h| {
        h["queue_waiting"] == 1 && h["slots_processing"] == 1
    })?;
    // C finds the slot and the queue full.
    let c = post(addr, "/v1/completions", &short)?;
    assert_eq!(c.status, 429, "{}", c.body);
    assert_eq!(c.header("retry-after"), Some("1"));
    let error = c.json()?;
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert_eq!(error["error"]["type"], "rate_limit_exceeded");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 slots"))
    );
    // A disconnects mid-stream: its slot goes to B, which completes.
    a.get_ref().shutdown(Shutdown::Both)?;
    drop(a);
    let mut b_reader = BufReader::new(b);
    let (status, _) = read_head(&mut b_reader)?;
    assert_eq!(status, 200);
    let health = wait_health(addr, |h| h["slots_processing"] == 0)?;
    assert_eq!(health["queue_waiting"], 0);
    let metrics = get(addr, "/metrics")?.body;
    assert_eq!(
        metric(&metrics, "tempra_requests_cancelled_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(&metrics, "tempra_requests_rejected_total"),
        Some(1.0)
    );
    let generated = metric(&metrics, "tempra_completion_tokens_total").expect("tokens");
    assert!(
        generated < 4000.0,
        "the abandoned stream ran to the end: {generated}"
    );
    // The slot serves again.
    let reply = post(addr, "/v1/completions", &short)?;
    assert_eq!(reply.status, 200);
    Ok(())
}

/// Queued requests whose clients disconnect leave the queue at once (not when a slot
/// frees up), so live clients are not refused for them.
#[test]
fn a_client_that_leaves_frees_its_queue_place_at_once() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 4096)?, |c| {
        c.slots = 1;
        c.queue = 2;
    })?;
    let addr = server.addr;
    let _a = long_stream(addr, &[], true)?;
    // Two waiters fill the queue: one waits for a whole response, one for a stream.
    let short = json!({"prompt": "hi", "max_tokens": 3, "temperature": 0, "ignore_eos": true});
    let waiting = send(
        addr,
        "POST",
        "/v1/completions",
        Some(short.to_string().as_bytes()),
    )?;
    let streaming = long_stream(addr, &[], false)?.into_inner();
    wait_health(addr, |h| h["queue_waiting"] == 2)?;
    assert_eq!(post(addr, "/v1/completions", &short)?.status, 429);
    // Both leave while A still holds the slot: their places are free at once.
    for gone in [waiting, streaming] {
        gone.shutdown(Shutdown::Both)?;
    }
    wait_health(addr, |h| {
        h["queue_waiting"] == 0 && h["slots_processing"] == 1
    })?;
    // A live client takes a place (its stream is admitted: 200 while it waits).
    let _live = long_stream(addr, &[], false)?;
    let health = wait_health(addr, |h| h["queue_waiting"] == 1)?;
    assert_eq!(health["slots_processing"], 1);
    let metrics = get(addr, "/metrics")?.body;
    assert_eq!(
        metric(&metrics, "tempra_requests_cancelled_total"),
        Some(2.0)
    );
    Ok(())
}

#[test]
fn prompt_cache_reuses_the_common_prefix() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 128)?, |c| c.slots = 1)?;
    let first = "the quick brown fox";
    let second = "the quick brown fox jumps over the lazy dog";
    let request = |prompt: &str| {
        post(
            server.addr,
            "/v1/completions",
            &json!({"prompt": prompt, "max_tokens": 6, "temperature": 0, "ignore_eos": true}),
        )
        .and_then(|r| r.json())
    };
    let one = request(first)?;
    assert_eq!(one["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let two = request(second)?;
    let first_tokens = completion_tokens(&server.model, first);
    let second_tokens = completion_tokens(&server.model, second);
    let shared = first_tokens
        .iter()
        .zip(&second_tokens)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(shared > 2, "the prompts should share a token prefix");
    // At least the shared prompt prefix (a generated token may happen to match more).
    let cached = two["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .expect("cached_tokens") as usize;
    assert!(
        (shared..second_tokens.len()).contains(&cached),
        "cached {cached}, shared prefix {shared}"
    );
    let expected = reference(&server.model, &second_tokens, 6)?;
    assert_eq!(two["choices"][0]["text"], expected.as_str());
    // The same prompt again: all but its last token come from the cache.
    let three = request(second)?;
    assert_eq!(
        three["usage"]["prompt_tokens_details"]["cached_tokens"],
        second_tokens.len() - 1
    );
    assert_eq!(three["choices"][0]["text"], expected.as_str());
    wait_health(server.addr, |h| h["slots_processing"] == 0)?;
    let metrics = get(server.addr, "/metrics")?.body;
    assert_eq!(
        metric(&metrics, "tempra_prompt_tokens_cached_total"),
        Some((cached + second_tokens.len() - 1) as f64)
    );
    Ok(())
}
