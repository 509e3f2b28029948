//! Readiness for load balancers: `/health` and the other requests while the model
//! loads (a `LoadingServer` holding the socket, then handing it to `Server::start`)
//! and while the server drains.

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tempra_llm::server::{LoadingServer, Server, ServerConfig};

use crate::fixtures::{LONG_CONTEXT, SMALL, TEMPLATE, load, model_file, start};
use crate::http_client::{Reply, get, post, read_chunk, read_head, read_reply, send};

/// Asserts that `reply` is a 503 OpenAI-style error with `Retry-After` whose message
/// contains `words`, and returns its `error` object.
fn unavailable(reply: &Reply, words: &str) -> anyhow::Result<serde_json::Value> {
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(
        reply.header("retry-after"),
        Some("1"),
        "{:?}",
        reply.headers
    );
    let error = reply.json()?["error"].clone();
    assert_eq!(error["type"], "server_error", "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains(words), "{error}");
    Ok(error)
}

#[test]
fn loading_answers_503_then_hands_the_bound_socket_to_the_server() -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let loading = LoadingServer::start(listener)?;
    let addr = loading.local_addr();
    let health = get(addr, "/health")?;
    assert_eq!(health.status, 503, "{}", health.body);
    assert_eq!(health.json()?, json!({"status": "loading"}));
    let body = json!({"prompt": "hi", "max_tokens": 4, "stream": true});
    let error = unavailable(&post(addr, "/v1/completions", &body)?, "loading")?;
    assert_eq!(error["code"], "model_loading");
    unavailable(&get(addr, "/v1/models")?, "loading")?;

    // Clients keep connecting through the handover: none is refused.
    let stop = Arc::new(AtomicBool::new(false));
    let prober = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || -> anyhow::Result<(usize, usize)> {
            let (mut loading, mut ok) = (0, 0);
            while !stop.load(Ordering::SeqCst) || ok == 0 {
                match get(addr, "/health")?.status {
                    503 => loading += 1,
                    200 => ok += 1,
                    status => anyhow::bail!("/health answered {status}"),
                }
            }
            Ok((loading, ok))
        })
    };
    let dir = model_file(SMALL)?;
    let model = load(&dir, 256)?;
    std::thread::sleep(Duration::from_millis(50));
    let listener = loading.into_listener()?;
    assert_eq!(listener.local_addr()?, addr);
    let mut config = ServerConfig::new("tiny-model");
    config.chat_template = Some(TEMPLATE.to_owned());
    let server = Server::start(model, config, listener)?;
    assert_eq!(server.local_addr(), addr);
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    let (loading, ok) = prober.join().expect("prober")?;
    assert!(loading > 0 && ok > 0, "{loading} loading, {ok} ok");

    let health = get(addr, "/health")?;
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(health.json()?["status"], "ok");
    let body = json!({"prompt": "hi", "max_tokens": 4, "temperature": 0, "ignore_eos": true});
    let reply = post(addr, "/v1/completions", &body)?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    server.shutdown()?;
    Ok(())
}

#[test]
fn a_loading_server_dropped_closes_its_socket() -> anyhow::Result<()> {
    let loading = LoadingServer::start(TcpListener::bind("127.0.0.1:0")?)?;
    let addr = loading.local_addr();
    assert_eq!(get(addr, "/health")?.status, 503);
    drop(loading);
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening"
    );
    Ok(())
}

/// Reads a stream's chunks to its end; whether it ended with `[DONE]` after a
/// `finish_reason`.
fn finish_stream(reader: &mut BufReader<std::net::TcpStream>) -> anyhow::Result<bool> {
    let (mut finished, mut done) = (false, false);
    while let Some(chunk) = read_chunk(reader)? {
        let text = String::from_utf8_lossy(&chunk);
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(data)?;
            anyhow::ensure!(v.get("error").is_none(), "the stream failed: {v}");
            finished |= v["choices"][0]["finish_reason"].is_string();
        }
    }
    Ok(finished && done)
}

#[test]
fn draining_answers_503_while_a_running_stream_finishes() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let mut server = start(load(&dir, 4096)?, |c| {
        c.drain_timeout = Duration::from_secs(120);
    })?;
    let addr: SocketAddr = server.addr;
    let body = json!({"prompt": "a long story", "max_tokens": 4000, "temperature": 0,
                      "ignore_eos": true, "stream": true});
    let mut reader = BufReader::new(send(
        addr,
        "POST",
        "/v1/completions",
        Some(body.to_string().as_bytes()),
    )?);
    assert_eq!(read_head(&mut reader)?.0, 200);
    assert!(
        read_chunk(&mut reader)?.is_some(),
        "the stream ended at once"
    );

    // A connection accepted before the shutdown, its request head half sent: it is
    // answered during the drain, not dropped.
    let mut half_sent = std::net::TcpStream::connect(addr)?;
    half_sent.set_read_timeout(Some(Duration::from_secs(60)))?;
    half_sent.write_all(b"GET /health HTTP/1.1\r\n")?;
    std::thread::sleep(Duration::from_millis(200));

    let running = server.server.take().expect("server");
    let shutdown = std::thread::spawn(move || running.shutdown());
    let started = Instant::now();
    // New connections during the drain: /health says draining (with the running
    // stream's slot), a new generation gets 503 with Retry-After.
    let health = loop {
        let reply = get(addr, "/health")?;
        if reply.status == 503 {
            break reply;
        }
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never draining"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let health = health.json()?;
    assert_eq!(health["status"], "draining", "{health}");
    assert_eq!(health["slots_processing"], 1, "{health}");
    let short = json!({"prompt": "hi", "max_tokens": 4});
    unavailable(&post(addr, "/v1/completions", &short)?, "shutting down")?;
    let chat = json!({"messages": [{"role": "user", "content": "hi"}], "stream": true});
    unavailable(&post(addr, "/v1/chat/completions", &chat)?, "shutting down")?;
    half_sent.write_all(format!("Host: {addr}\r\n\r\n").as_bytes())?;
    let reply = read_reply(&mut half_sent)?;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(reply.json()?["status"], "draining", "{}", reply.body);
    assert!(!shutdown.is_finished(), "the drain ended before the stream");

    // The running stream still completes, then the server stops listening.
    assert!(finish_stream(&mut reader)?, "the stream did not finish");
    shutdown.join().expect("shutdown thread")?;
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening"
    );
    Ok(())
}
