//! Connections: slow request heads and bodies, idle keep-alive connections, the
//! connection cap, an oversized `Content-Length`, and the graceful shutdown. Timeouts
//! are short so that the tests take seconds; what they assert is behaviour (who gets
//! closed, who gets answered), not timings.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::{
    SMALL, completion_tokens, load, metric, model_file, raise_fd_limit, reference, start,
};
use crate::http_client::{get, read_chunk, read_head, read_reply_from, send, until_closed};

const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(60);

/// A connection that sent `bytes` and nothing more.
fn partial(addr: std::net::SocketAddr, bytes: &[u8]) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(bytes)?;
    Ok(stream)
}

/// `GET path` on a kept-alive connection, and its response.
fn keep_alive_get(
    reader: &mut BufReader<TcpStream>,
    path: &str,
) -> anyhow::Result<crate::http_client::Reply> {
    let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    reader.get_mut().write_all(head.as_bytes())?;
    read_reply_from(reader)
}

#[test]
fn slow_request_heads_are_closed_while_health_answers() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.header_timeout = SHORT;
        c.idle_timeout = LONG;
        c.body_timeout = LONG;
    })?;
    let addr = server.addr;
    // Slowloris: heads that never end, and connections that never send anything.
    let mut slow = Vec::new();
    for _ in 0..20 {
        slow.push(partial(
            addr,
            b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Wait: ",
        )?);
    }
    for _ in 0..5 {
        slow.push(TcpStream::connect(addr)?);
    }
    // One byte every 50 ms: the whole head would take 4 s; the header timeout runs from
    // the first byte, not from the last.
    let trickle = std::thread::spawn(move || -> anyhow::Result<bool> {
        let mut stream = TcpStream::connect(addr)?;
        let head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        for byte in head {
            if stream.write_all(&[*byte]).is_err() {
                return Ok(true); // closed under it
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let answer = until_closed(&mut stream)?;
        Ok(!String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"))
    });
    let health = get(addr, "/health")?;
    assert_eq!(health.status, 200, "{}", health.body);
    for stream in &mut slow {
        let answer = until_closed(stream)?;
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    }
    assert!(
        trickle.join().expect("trickle thread")?,
        "a head sent one byte at a time was served"
    );
    let metrics = get(addr, "/metrics")?.body;
    let closed = metric(
        &metrics,
        "tempra_http_connections_closed_total{reason=\"header_timeout\"}",
    )
    .expect("header_timeout metric");
    assert!(closed >= 26.0, "{closed}");
    Ok(())
}

#[test]
fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.header_timeout = LONG;
        c.idle_timeout = SHORT;
    })?;
    let mut reader = BufReader::new(TcpStream::connect(server.addr)?);
    // Kept alive: several requests on one connection.
    for _ in 0..3 {
        assert_eq!(keep_alive_get(&mut reader, "/health")?.status, 200);
    }
    let rest = until_closed(reader.get_mut())?;
    assert!(rest.is_empty());
    let metrics = get(server.addr, "/metrics")?.body;
    assert_eq!(
        metric(
            &metrics,
            "tempra_http_connections_closed_total{reason=\"idle_timeout\"}"
        ),
        Some(1.0)
    );
    Ok(())
}

/// 500 idle connections against a cap of 100: each new connection closes the one that
/// waited longest, so `/health` (and the newest connections) keep working. The test
/// holds 500 sockets and the server up to 100 more, in this process: the open-file
/// limit is raised for that, and where the hard limit is lower the counts shrink in the
/// same 5:1 ratio.
#[test]
fn idle_connections_beyond_the_cap_do_not_lock_out_health() -> anyhow::Result<()> {
    let limit = raise_fd_limit(4096);
    let idle = 500.min(limit.saturating_sub(300) as usize / 6 * 5);
    let cap = idle / 5;
    assert!(
        cap >= 10,
        "the open-file limit ({limit}) is too low for this test"
    );
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.max_connections = cap;
        c.header_timeout = LONG;
        c.idle_timeout = LONG;
    })?;
    let addr = server.addr;
    let mut sockets = Vec::with_capacity(idle);
    for i in 0..idle {
        let stream = TcpStream::connect(addr)?;
        let mut reader = BufReader::new(stream);
        if i % 2 == 0 {
            // Kept alive after one request.
            assert_eq!(
                keep_alive_get(&mut reader, "/health")?.status,
                200,
                "connection {i}"
            );
        }
        sockets.push(reader);
    }
    let health = get(addr, "/health")?;
    assert_eq!(health.status, 200, "{}", health.body);
    // The newest kept-alive connection still serves; the oldest was closed.
    let newest = (idle - 1) & !1; // the last kept-alive one
    assert_eq!(keep_alive_get(&mut sockets[newest], "/health")?.status, 200);
    assert!(until_closed(sockets[0].get_mut())?.is_empty());
    let metrics = get(addr, "/metrics")?.body;
    let open = metric(&metrics, "tempra_http_connections").expect("gauge");
    let evicted = metric(
        &metrics,
        "tempra_http_connections_closed_total{reason=\"evicted\"}",
    )
    .expect("evictions");
    assert!(open <= cap as f64, "{open} open, cap {cap}");
    assert!(evicted >= (idle - cap) as f64, "{evicted} evicted");
    Ok(())
}

#[test]
fn an_oversized_content_length_gets_413_at_once_and_a_slow_body_408() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.body_timeout = SHORT;
        c.header_timeout = LONG;
    })?;
    let addr = server.addr;
    // The body never comes: the answer must not wait for it.
    let stream = partial(
        addr,
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{\"prompt\":",
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream);
    let reply = read_reply_from(&mut reader)?;
    assert_eq!(reply.status, 413, "{}", reply.body);
    assert_eq!(reply.json()?["error"]["code"], "request_too_large");
    assert_eq!(reply.header("connection"), Some("close"));
    until_closed(reader.get_mut())?;
    // A body that stops short of its length: 408 after the body timeout, then closed.
    let stream = partial(
        addr,
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": \"a",
    )?;
    let mut reader = BufReader::new(stream);
    let reply = read_reply_from(&mut reader)?;
    assert_eq!(reply.status, 408, "{}", reply.body);
    assert_eq!(reply.json()?["error"]["code"], "request_timeout");
    until_closed(reader.get_mut())?;
    let metrics = get(addr, "/metrics")?.body;
    assert_eq!(
        metric(&metrics, "tempra_request_body_timeouts_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(&metrics, "tempra_requests_total{endpoint=\"completions\"}"),
        Some(1.0)
    );
    Ok(())
}

#[test]
fn shutdown_lets_a_running_stream_finish_then_closes() -> anyhow::Result<()> {
    let dir = model_file("dim=64,layers=2,heads=4,ffn=128,vocab=400,context=1024")?;
    let mut server = start(load(&dir, 1024)?, |c| {
        c.drain_timeout = LONG;
        c.idle_timeout = LONG;
    })?;
    let addr = server.addr;
    let prompt = "a long story";
    let expected = reference(
        &server.model,
        &completion_tokens(&server.model, prompt),
        600,
    )?;
    // An idle kept-alive connection, and a stream in progress.
    let mut idle = BufReader::new(TcpStream::connect(addr)?);
    assert_eq!(keep_alive_get(&mut idle, "/health")?.status, 200);
    let body = json!({"prompt": prompt, "max_tokens": 600, "temperature": 0, "ignore_eos": true, "stream": true});
    let stream = send(
        addr,
        "POST",
        "/v1/completions",
        Some(body.to_string().as_bytes()),
    )?;
    let mut reader = BufReader::new(stream);
    let (status, _) = read_head(&mut reader)?;
    assert_eq!(status, 200);
    let mut text = String::new();
    let mut add = |chunk: &[u8]| -> anyhow::Result<bool> {
        let line = String::from_utf8_lossy(chunk);
        let mut done = false;
        for data in line.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if data == "[DONE]" {
                done = true;
            } else {
                let v: serde_json::Value = serde_json::from_str(data)?;
                anyhow::ensure!(v.get("error").is_none(), "the stream failed: {v}");
                text.push_str(v["choices"][0]["text"].as_str().unwrap_or_default());
            }
        }
        Ok(done)
    };
    add(&read_chunk(&mut reader)?.expect("a first chunk"))?;
    let shutting_down = &AtomicBool::new(false);
    let running = server.server.take().expect("server");
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let shutdown = scope.spawn(move || {
            shutting_down.store(true, Ordering::SeqCst);
            running.shutdown()
        });
        let mut done = false;
        let mut during_shutdown = false;
        while let Some(chunk) = read_chunk(&mut reader)? {
            during_shutdown |= shutting_down.load(Ordering::SeqCst);
            done |= add(&chunk)?;
        }
        assert!(done, "the stream ended without [DONE]");
        assert!(
            during_shutdown,
            "the stream ended before the shutdown began"
        );
        shutdown.join().expect("shutdown thread")?;
        Ok(())
    })?;
    assert_eq!(text, expected);
    // The idle connection was closed, and nothing listens any more.
    assert!(until_closed(idle.get_mut())?.is_empty());
    assert!(TcpStream::connect(addr).is_err(), "still listening");
    Ok(())
}
