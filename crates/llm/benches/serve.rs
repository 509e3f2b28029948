//! Server load test: aggregate decode tok/s and request latency percentiles with 1, 2 and
//! 4 concurrent streaming clients against `tempra_llm::server` over loopback HTTP, on a
//! random-weight model (`TEMPRA_SERVE_BENCH_SHAPE`, default `110m`, Q8_0), one KV slot
//! per client.
//!
//! `cargo bench -p tempra-llm --bench serve` (environment: `TEMPRA_SERVE_BENCH_TOKENS`
//! tokens per request, default 64; `TEMPRA_SERVE_BENCH_REQUESTS` requests per client,
//! default 4; `TEMPRA_SERVE_BENCH_THREADS` engine threads, default all cores).

#[path = "../tests/server/http_client.rs"]
#[allow(dead_code)]
mod http_client;

use std::io::BufReader;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::json;
use tempra_llm::engine::{LoadOptions, Model};
use tempra_llm::quantize::QuantType;
use tempra_llm::server::{Server, ServerConfig};
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One streamed request: (time to first token, total time, tokens).
fn one_request(
    addr: std::net::SocketAddr,
    tokens: usize,
    seed: usize,
) -> anyhow::Result<(Duration, Duration, usize)> {
    let body = json!({
        "prompt": format!("request {seed}: once upon a time"),
        "max_tokens": tokens, "temperature": 0, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": true},
    });
    let start = Instant::now();
    let stream = http_client::send(
        addr,
        "POST",
        "/v1/completions",
        Some(body.to_string().as_bytes()),
    )?;
    let mut reader = BufReader::new(stream);
    let (status, _) = http_client::read_head(&mut reader)?;
    anyhow::ensure!(status == 200, "status {status}");
    let mut first = None;
    let mut generated = 0;
    while let Some(chunk) = http_client::read_chunk(&mut reader)? {
        first.get_or_insert_with(|| start.elapsed());
        for line in String::from_utf8_lossy(&chunk).lines() {
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(data)
                && let Some(n) = v["usage"]["completion_tokens"].as_u64()
            {
                generated = n as usize;
            }
        }
    }
    Ok((first.unwrap_or_default(), start.elapsed(), generated))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(()); // `cargo test --benches` lists benchmarks; this one is a program.
    }
    let shape = std::env::var("TEMPRA_SERVE_BENCH_SHAPE").unwrap_or_else(|_| "110m".into());
    let tokens = env_usize("TEMPRA_SERVE_BENCH_TOKENS", 64);
    let requests = env_usize("TEMPRA_SERVE_BENCH_REQUESTS", 4);
    let threads = std::env::var("TEMPRA_SERVE_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok());
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.gguf");
    let spec = RandomModelSpec::llama(ModelShape::parse(&shape)?).with_qtype(QuantType::Q8_0);
    std::fs::write(&path, write_random_model(&spec, Vec::new())?)?;
    let model = Model::load(
        &path,
        &LoadOptions {
            threads,
            context_length: Some(512),
            ..LoadOptions::default()
        },
    )?;
    println!(
        "model {shape} Q8_0, {} engine threads, {tokens} tokens per request, {requests} requests per client",
        model.threads()
    );
    println!("clients  aggregate tok/s  per-client tok/s  TTFT p50/p90 ms  latency p50/p90/p99 ms");
    for clients in [1usize, 2, 4] {
        let config = ServerConfig {
            slots: clients,
            ..ServerConfig::new("bench")
        };
        let server = Server::start(model.clone(), config, TcpListener::bind("127.0.0.1:0")?)?;
        let addr = server.local_addr();
        one_request(addr, 4, 0)?; // warm-up
        let start = Instant::now();
        let results: Vec<anyhow::Result<Vec<(Duration, Duration, usize)>>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..clients)
                    .map(|c| {
                        scope.spawn(move || {
                            (0..requests)
                                .map(|r| one_request(addr, tokens, c * 100 + r))
                                .collect::<anyhow::Result<Vec<_>>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("client thread"))
                    .collect()
            });
        let elapsed = start.elapsed();
        let mut ttft = Vec::new();
        let mut latency = Vec::new();
        let mut total = 0;
        for r in results {
            for (first, all, n) in r? {
                ttft.push(first);
                latency.push(all);
                total += n;
            }
        }
        ttft.sort();
        latency.sort();
        let agg = total as f64 / elapsed.as_secs_f64();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{clients:>7}  {agg:>15.1}  {:>16.1}  {:>7.1}/{:<7.1}  {:.1}/{:.1}/{:.1}",
            agg / clients as f64,
            ms(percentile(&ttft, 0.5)),
            ms(percentile(&ttft, 0.9)),
            ms(percentile(&latency, 0.5)),
            ms(percentile(&latency, 0.9)),
            ms(percentile(&latency, 0.99)),
        );
        server.shutdown()?;
    }
    Ok(())
}
