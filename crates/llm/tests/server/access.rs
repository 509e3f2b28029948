//! Who may call: API keys (401s, `/health` open, per-key limits) and browsers (foreign
//! `Origin` and `Host` refused, CORS and preflights for allowed origins).

use serde_json::json;
use tempra_llm::server::ApiKey;

use crate::fixtures::{
    LONG_CONTEXT, SMALL, load, long_stream, metric, model_file, start, wait_health,
};
use crate::http_client::{Reply, request_with};

const COMPLETION: &str = r#"{"prompt": "hi", "max_tokens": 2, "temperature": 0}"#;

fn assert_refused(reply: &Reply, status: u16, code: &str) -> anyhow::Result<()> {
    assert_eq!(reply.status, status, "{}", reply.body);
    let body = reply.json()?;
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
    Ok(())
}

#[test]
fn api_keys_are_required_except_for_health() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.api_keys = vec![
            ApiKey::new("sk-one").expect("key"),
            ApiKey::new("sk-two").expect("key"),
        ];
    })?;
    let addr = server.addr;
    let call = |method: &str, path: &str, auth: Option<&str>, body: Option<&str>| {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        request_with(addr, method, path, &headers, body)
    };
    assert_eq!(call("GET", "/health", None, None)?.status, 200);
    for path in ["/v1/models", "/metrics", "/props", "/slots"] {
        let reply = call("GET", path, None, None)?;
        assert_refused(&reply, 401, "invalid_api_key")?;
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
    }
    for wrong in [
        "Bearer sk-three",
        "Bearer sk-on",
        "Bearer sk-one-and-more",
        "Basic c2stb25l",
        "sk-one",
    ] {
        let reply = call("POST", "/v1/completions", Some(wrong), Some(COMPLETION))?;
        assert_refused(&reply, 401, "invalid_api_key")?;
    }
    for key in ["Bearer sk-one", "Bearer sk-two", "bearer sk-two"] {
        assert_eq!(
            call("GET", "/v1/models", Some(key), None)?.status,
            200,
            "{key}"
        );
        let reply = call("POST", "/v1/completions", Some(key), Some(COMPLETION))?;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let metrics = call("GET", "/metrics", Some("Bearer sk-one"), None)?.body;
    assert_eq!(
        metric(&metrics, "tempra_requests_unauthorized_total"),
        Some(9.0)
    );
    // Refused requests never reached the engine.
    assert_eq!(
        metric(&metrics, "tempra_requests_total{endpoint=\"completions\"}"),
        Some(3.0)
    );
    Ok(())
}

#[test]
fn a_key_over_its_concurrency_limit_gets_429_with_retry_after() -> anyhow::Result<()> {
    let dir = model_file(LONG_CONTEXT)?;
    let server = start(load(&dir, 4096)?, |c| {
        c.slots = 1;
        c.queue = 4;
        c.api_keys = vec![
            ApiKey::new("sk-a").expect("key"),
            ApiKey::new("sk-b").expect("key"),
        ];
        c.api_key_concurrency = Some(1);
    })?;
    let addr = server.addr;
    // Key A runs a long stream.
    let a = long_stream(addr, &[("Authorization", "Bearer sk-a")], true)?;
    // A second request of key A is over the key's limit (the server has room).
    let reply = request_with(
        addr,
        "POST",
        "/v1/completions",
        &[("Authorization", "Bearer sk-a")],
        Some(COMPLETION),
    )?;
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert_eq!(reply.header("retry-after"), Some("1"));
    let body = reply.json()?;
    assert_eq!(body["error"]["type"], "rate_limit_exceeded");
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("API key")),
        "{body}"
    );
    // Key B is admitted (it waits in the queue behind A).
    let b = long_stream(addr, &[("Authorization", "Bearer sk-b")], false)?;
    wait_health(addr, |h| h["queue_waiting"] == 1)?;
    // A ends: its share of the key is free again.
    drop((a, b));
    wait_health(addr, |h| {
        h["slots_processing"] == 0 && h["queue_waiting"] == 0
    })?;
    let reply = request_with(
        addr,
        "POST",
        "/v1/completions",
        &[("Authorization", "Bearer sk-a")],
        Some(COMPLETION),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    Ok(())
}

#[test]
fn foreign_origins_and_hosts_are_refused() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.allowed_hosts = vec!["llm.internal".into()]
    })?;
    let addr = server.addr;
    // A "simple" cross-site POST (no preflight in a browser) and a JSON one.
    for content_type in ["text/plain", "application/json"] {
        let reply = request_with(
            addr,
            "POST",
            "/v1/completions",
            &[
                ("Origin", "https://evil.example"),
                ("Content-Type", content_type),
            ],
            Some(COMPLETION),
        )?;
        assert_refused(&reply, 403, "origin_not_allowed")?;
        assert!(reply.header("access-control-allow-origin").is_none());
    }
    let reply = request_with(addr, "GET", "/v1/models", &[("Origin", "null")], None)?;
    assert_refused(&reply, 403, "origin_not_allowed")?;
    // A preflight from a page that is not allowed.
    let reply = request_with(
        addr,
        "OPTIONS",
        "/v1/chat/completions",
        &[
            ("Origin", "https://evil.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        None,
    )?;
    assert_refused(&reply, 403, "origin_not_allowed")?;
    // DNS rebinding: a name that points here but is not ours.
    for host in [
        "evil.example",
        "evil.example:8080",
        "127.0.0.1.evil.example",
    ] {
        let reply = request_with(
            addr,
            "POST",
            "/v1/completions",
            &[("Host", host)],
            Some(COMPLETION),
        )?;
        assert_refused(&reply, 403, "host_not_allowed")?;
    }
    // IP addresses, localhost and allowed names are served; so is a client without Origin.
    let port = addr.port().to_string();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "[::1]".into(),
        "llm.internal".into(),
    ] {
        let reply = request_with(
            addr,
            "POST",
            "/v1/completions",
            &[("Host", &host)],
            Some(COMPLETION),
        )?;
        assert_eq!(reply.status, 200, "{host}: {}", reply.body);
    }
    let metrics = request_with(addr, "GET", "/metrics", &[], None)?.body;
    assert_eq!(
        metric(&metrics, "tempra_requests_forbidden_total"),
        Some(7.0)
    );
    assert_eq!(
        metric(&metrics, "tempra_requests_total{endpoint=\"completions\"}"),
        Some(4.0)
    );
    Ok(())
}

#[test]
fn allowed_origins_get_cors_headers_and_preflights() -> anyhow::Result<()> {
    let dir = model_file(SMALL)?;
    let server = start(load(&dir, 64)?, |c| {
        c.cors_origins = vec!["https://app.example".into()];
        c.api_keys = vec![ApiKey::new("sk-web").expect("key")];
    })?;
    let addr = server.addr;
    let origin = ("Origin", "https://app.example");
    // The preflight needs no key (browsers send none).
    let reply = request_with(
        addr,
        "OPTIONS",
        "/v1/chat/completions",
        &[
            origin,
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type, x-stainless-os",
            ),
        ],
        None,
    )?;
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(
        reply
            .header("access-control-allow-methods")
            .is_some_and(|m| m.contains("POST"))
    );
    assert_eq!(
        reply.header("access-control-allow-headers"),
        Some("authorization, content-type, x-stainless-os")
    );
    assert!(reply.header("access-control-max-age").is_some());
    assert!(
        reply
            .headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("vary") && v.contains("origin"))
    );
    // The request itself, with its key: served with CORS headers.
    let chat =
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0})
            .to_string();
    let reply = request_with(
        addr,
        "POST",
        "/v1/chat/completions",
        &[origin, ("Authorization", "Bearer sk-web")],
        Some(&chat),
    )?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    // Errors carry them too, so that the page can read them.
    let reply = request_with(addr, "POST", "/v1/chat/completions", &[origin], Some(&chat))?;
    assert_refused(&reply, 401, "invalid_api_key")?;
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    // Another origin is still refused.
    let reply = request_with(
        addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Origin", "https://app.example.evil"),
            ("Authorization", "Bearer sk-web"),
        ],
        Some(&chat),
    )?;
    assert_refused(&reply, 403, "origin_not_allowed")?;
    Ok(())
}
