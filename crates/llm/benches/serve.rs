//! Server load test over loopback HTTP: streamed `/v1/completions` from concurrent
//! clients against an in-process `tempra_llm::server`, or against any running
//! OpenAI-compatible server (`tempra serve`, llama-server) to compare them with the same
//! client.
//!
//! `cargo bench -p tempra-llm --bench serve` prints, for each number of concurrent
//! clients, the aggregate generated tokens/s, time to first token and the gaps between a
//! stream's tokens (median, p99, max). With `TEMPRA_SERVE_BENCH_LONG_PROMPT=N` it runs
//! the interference scenario instead: one stream decoding while a prompt of `N` tokens
//! arrives; it prints the stream's gaps (largest over median) and the long prompt's time
//! to first token against the same prompt alone; with `TEMPRA_SERVE_BENCH_LONG_SCORED=1`
//! that prompt is scored (`echo` with `logprobs`, as evaluation harnesses send it);
//! `TEMPRA_SERVE_BENCH_ROUNDS=R` runs the scenario R times (each round the prompt alone,
//! beside the stream, and alone again, with prompts of its own) and prints the medians of
//! the rounds' ratios, how many rounds met the serving targets, and how far the two
//! alone runs of a round differed (the machine's own noise).
//!
//! Environment:
//! - `TEMPRA_SERVE_BENCH_URL`: `host:port` of a running server to load (no in-process
//!   server then); otherwise an in-process server over `TEMPRA_SERVE_BENCH_MODEL` (a
//!   GGUF file) or a random-weight model of `TEMPRA_SERVE_BENCH_SHAPE` (default `110m`,
//!   Q4_0), with `TEMPRA_SERVE_BENCH_SLOTS` slots (default 4) of
//!   `TEMPRA_SERVE_BENCH_CTX` positions (default 512) and `TEMPRA_SERVE_BENCH_THREADS`
//!   engine threads (default: physical cores);
//! - `TEMPRA_SERVE_BENCH_CLIENTS`: the client counts (default `1,2,4,8`);
//! - `TEMPRA_SERVE_BENCH_TOKENS`: tokens per request (default 64);
//! - `TEMPRA_SERVE_BENCH_REQUESTS`: requests per client (default 4).
//!
//! Prompts are token ids (both servers take them), different for every request so that
//! no prompt cache helps one server more than the other.

#[path = "../tests/server/http_client.rs"]
#[allow(dead_code)]
mod http_client;

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tempra_llm::server::{Server, ServerConfig};

mod common;
use common::{bench_model, env_usize, median};

/// What one streamed request saw.
struct Trace {
    /// When the request started.
    start: Instant,
    /// When the first token arrived, from the request's start.
    first: Duration,
    /// When each token's event arrived, from the request's start.
    arrivals: Vec<Duration>,
    /// Generated tokens (the usage's count where the server reports it).
    tokens: usize,
}

/// A prompt of `len` token ids for request `seed`: a BOS, then ids from a generator
/// (within any vocabulary of at least 5300 tokens).
fn prompt(len: usize, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut ids = vec![1];
    while ids.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ids.push(300 + (state % 5000) as u32);
    }
    ids
}

/// One streamed completion of `tokens` tokens after `prompt`; `on_token` sees each
/// token's arrival.
fn stream(
    addr: SocketAddr,
    prompt: &[u32],
    tokens: usize,
    on_token: impl FnMut(usize),
) -> anyhow::Result<Trace> {
    stream_scored(addr, prompt, tokens, false, on_token)
}

/// [`stream`], the prompt scored (`echo` with `logprobs`) when `scored`.
fn stream_scored(
    addr: SocketAddr,
    prompt: &[u32],
    tokens: usize,
    scored: bool,
    mut on_token: impl FnMut(usize),
) -> anyhow::Result<Trace> {
    let mut body = json!({
        "prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": true,
        "stream": true, "stream_options": {"include_usage": true}, "cache_prompt": true,
    });
    if scored {
        body["echo"] = json!(true);
        body["logprobs"] = json!(1);
    }
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
    let mut arrivals = Vec::new();
    let mut usage = None;
    let mut pending = String::new();
    while let Some(chunk) = http_client::read_chunk(&mut reader)? {
        let now = start.elapsed();
        pending.push_str(&String::from_utf8_lossy(&chunk));
        // Whole lines only: an event may span chunks.
        let Some(end) = pending.rfind('\n') else {
            continue;
        };
        let lines: String = pending.drain(..=end).collect();
        for line in lines.lines() {
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                continue;
            };
            if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
                usage = Some(n as usize);
            }
            let text = v["choices"][0]["text"].as_str().unwrap_or("");
            if !text.is_empty() {
                arrivals.push(now);
                on_token(arrivals.len());
            }
        }
    }
    let first = arrivals.first().copied().unwrap_or_else(|| start.elapsed());
    Ok(Trace {
        start,
        first,
        tokens: usage.unwrap_or(arrivals.len()),
        arrivals,
    })
}

/// The `p` quantile of `sorted` (nearest rank).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The gaps between consecutive arrivals, sorted.
fn gaps(arrivals: &[Duration]) -> Vec<Duration> {
    let mut gaps: Vec<Duration> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort();
    gaps
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The server under load: an address, and the in-process server if it is ours.
struct Target {
    addr: SocketAddr,
    server: Option<Server>,
    /// The random model's directory, kept while the server runs.
    _dir: Option<tempfile::TempDir>,
}

/// The in-process server, or the address of `TEMPRA_SERVE_BENCH_URL`.
fn target(ctx: usize) -> anyhow::Result<(Target, String)> {
    if let Ok(url) = std::env::var("TEMPRA_SERVE_BENCH_URL") {
        let host = url.trim_start_matches("http://").trim_end_matches('/');
        let addr = host
            .to_socket_addrs()?
            .next()
            .with_context(|| format!("no address for {host}"))?;
        let target = Target {
            addr,
            server: None,
            _dir: None,
        };
        return Ok((target, format!("server at {url}")));
    }
    let slots = env_usize("TEMPRA_SERVE_BENCH_SLOTS", 4);
    let (model, what, dir) = bench_model("TEMPRA_SERVE_BENCH", ctx)?;
    let what = format!(
        "in-process tempra: {what}, {slots} slots of {ctx}, {} engine threads",
        model.threads()
    );
    let config = ServerConfig {
        slots,
        ..ServerConfig::new("bench")
    };
    let server = Server::start(model, config, TcpListener::bind("127.0.0.1:0")?)?;
    let addr = server.local_addr();
    Ok((
        Target {
            addr,
            server: Some(server),
            _dir: dir,
        },
        what,
    ))
}

/// Aggregate throughput and latency at each client count.
fn throughput(addr: SocketAddr) -> anyhow::Result<()> {
    let tokens = env_usize("TEMPRA_SERVE_BENCH_TOKENS", 64);
    let requests = env_usize("TEMPRA_SERVE_BENCH_REQUESTS", 4);
    let clients: Vec<usize> = std::env::var("TEMPRA_SERVE_BENCH_CLIENTS")
        .unwrap_or_else(|_| "1,2,4,8".into())
        .split(',')
        .map(|c| c.trim().parse())
        .collect::<Result<_, _>>()
        .context("TEMPRA_SERVE_BENCH_CLIENTS: comma-separated counts")?;
    println!("{tokens} tokens per request, {requests} requests per client, prompts of 16 tokens");
    println!("clients  aggregate tok/s  TTFT p50/p90 ms  gap p50/p99/max ms");
    stream(addr, &prompt(16, 1), 4, |_| {})?; // warm-up
    for (round, &clients) in clients.iter().enumerate() {
        let start = Instant::now();
        let traces: Vec<anyhow::Result<Vec<Trace>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|c| {
                    scope.spawn(move || {
                        (0..requests)
                            .map(|r| {
                                let seed = (round * 10_000 + c * 100 + r + 2) as u64;
                                stream(addr, &prompt(16, seed), tokens, |_| {})
                            })
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
        let mut all_gaps = Vec::new();
        let mut total = 0;
        for trace in traces.into_iter().collect::<anyhow::Result<Vec<_>>>()? {
            for t in trace {
                ttft.push(t.first);
                all_gaps.extend(gaps(&t.arrivals));
                total += t.tokens;
            }
        }
        ttft.sort();
        all_gaps.sort();
        println!(
            "{clients:>7}  {:>15.1}  {:>7.1}/{:<7.1}  {:.1}/{:.1}/{:.1}",
            total as f64 / elapsed.as_secs_f64(),
            ms(percentile(&ttft, 0.5)),
            ms(percentile(&ttft, 0.9)),
            ms(percentile(&all_gaps, 0.5)),
            ms(percentile(&all_gaps, 0.99)),
            ms(all_gaps.last().copied().unwrap_or_default()),
        );
    }
    Ok(())
}

/// The serving target for a stream's largest gap beside a long prompt, in medians.
const MAX_GAP_RATIO: f64 = 3.0;
/// The serving target for a long prompt's time to first token beside a stream, in
/// its time alone.
const MAX_TTFT_RATIO: f64 = 1.25;

/// What one round of the interference scenario measured.
struct Round {
    /// The stream's largest gap over its median gap.
    gap_ratio: f64,
    /// The long prompt's time to first token beside the stream over its time alone
    /// (the mean of the runs before and after).
    ttft_ratio: f64,
    /// How far the two alone runs differed: the larger over the smaller, less one.
    alone_spread: f64,
}

/// `TEMPRA_SERVE_BENCH_ROUNDS` rounds of [`long_prompt_round`], alone, beside and alone
/// again within each round (a machine whose speed drifts moves all three), then the
/// medians of the rounds' ratios, how many rounds met the serving targets
/// (docs/serving.md) and the median spread of the alone runs: a ratio closer to its
/// target than that spread is not decided by this machine.
fn long_prompt(addr: SocketAddr, long: usize) -> anyhow::Result<()> {
    let rounds = env_usize("TEMPRA_SERVE_BENCH_ROUNDS", 1).max(1);
    stream(addr, &prompt(16, 1), 4, |_| {})?; // warm-up
    let mut results = Vec::with_capacity(rounds);
    for round in 0..rounds {
        if rounds > 1 {
            println!("round {}/{rounds}", round + 1);
        }
        results.push(long_prompt_round(addr, long, round as u64)?);
    }
    if rounds > 1 {
        let met = results
            .iter()
            .filter(|r| r.gap_ratio <= MAX_GAP_RATIO && r.ttft_ratio <= MAX_TTFT_RATIO)
            .count();
        println!(
            "{rounds} rounds: max/median gap median {:.2}, time to first token beside/alone median {:.2}x; {met} of {rounds} rounds within both targets (gap <= {MAX_GAP_RATIO}x median, time to first token <= {MAX_TTFT_RATIO}x); the alone runs of a round differed by {:.1} % (median)",
            median(results.iter().map(|r| r.gap_ratio).collect()),
            median(results.iter().map(|r| r.ttft_ratio).collect()),
            100.0 * median(results.iter().map(|r| r.alone_spread).collect()),
        );
    }
    Ok(())
}

/// One stream decoding while a prompt of `long` tokens arrives, between two runs of a
/// prompt of that length alone; `round` picks prompts no earlier round sent (nothing
/// cached).
fn long_prompt_round(addr: SocketAddr, long: usize, round: u64) -> anyhow::Result<Round> {
    let tokens = env_usize("TEMPRA_SERVE_BENCH_TOKENS", 512);
    let scored = env_usize("TEMPRA_SERVE_BENCH_LONG_SCORED", 0) == 1;
    let seed = 10 * round;
    // Alone (a prompt of its own: nothing cached), before and after the stream.
    let alone_before = stream_scored(addr, &prompt(long, seed + 7), 1, scored, |_| {})?.first;
    // Beside a stream: the long prompt goes once the stream has 16 tokens.
    let (tx, rx) = std::sync::mpsc::channel();
    let (decoding, beside) = std::thread::scope(|scope| {
        let decoding = scope.spawn(move || {
            stream(addr, &prompt(16, seed + 8), tokens, |n| {
                if n == 16 {
                    let _ = tx.send(Instant::now());
                }
            })
        });
        let beside = scope.spawn(move || -> anyhow::Result<(Instant, Trace)> {
            let sent = rx.recv().context("the stream ended before 16 tokens")?;
            Ok((
                sent,
                stream_scored(addr, &prompt(long, seed + 9), 1, scored, |_| {})?,
            ))
        });
        (
            decoding.join().expect("stream thread"),
            beside.join().expect("prompt thread"),
        )
    });
    let decoding = decoding?;
    let (sent, beside) = beside?;
    let alone_after = stream_scored(addr, &prompt(long, seed + 6), 1, scored, |_| {})?.first;
    let (before, after) = (alone_before.as_secs_f64(), alone_after.as_secs_f64());
    let alone = (before + after) / 2.0;
    let sorted = gaps(&decoding.arrivals);
    let median = percentile(&sorted, 0.5);
    let max = sorted.last().copied().unwrap_or_default();
    // Where the largest gap came: after which token.
    let at = decoding
        .arrivals
        .windows(2)
        .position(|w| w[1] - w[0] == max)
        .map_or(0, |i| i + 1);
    // The gaps while the prompt went in (from the stream's 16th token to the token
    // after the prompt's first).
    let answered = sent + beside.first;
    let during: Vec<Duration> = {
        let base = decoding.start;
        let mut g: Vec<Duration> = decoding
            .arrivals
            .windows(2)
            .filter(|w| base + w[0] >= sent && base + w[0] <= answered)
            .map(|w| w[1] - w[0])
            .collect();
        g.sort();
        g
    };
    let gap_ratio = max.as_secs_f64() / median.as_secs_f64().max(1e-9);
    let ttft_ratio = beside.first.as_secs_f64() / alone.max(1e-9);
    let alone_spread = before.max(after) / before.min(after).max(1e-9) - 1.0;
    println!(
        "stream of {} tokens beside a {long}-token prompt: gap median {:.1} ms, p99 {:.1}, max {:.1} after token {at} (max/median {:.2}); while the prompt went in: {} gaps, median {:.1} ms, max {:.1}",
        decoding.tokens,
        ms(median),
        ms(percentile(&sorted, 0.99)),
        ms(max),
        gap_ratio,
        during.len(),
        ms(percentile(&during, 0.5)),
        ms(during.last().copied().unwrap_or_default()),
    );
    println!(
        "{long}-token {}prompt: time to first token {:.0} ms alone (before {:.0}, after {:.0}), {:.0} ms beside the stream ({:.2}x)",
        if scored { "scored " } else { "" },
        alone * 1e3,
        before * 1e3,
        after * 1e3,
        ms(beside.first),
        ttft_ratio,
    );
    Ok(Round {
        gap_ratio,
        ttft_ratio,
        alone_spread,
    })
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(()); // `cargo test --benches` lists benchmarks; this one is a program.
    }
    let long = env_usize("TEMPRA_SERVE_BENCH_LONG_PROMPT", 0);
    let ctx = env_usize("TEMPRA_SERVE_BENCH_CTX", if long > 0 { 2048 } else { 512 });
    let (target, what) = target(ctx)?;
    println!("{what}");
    if long > 0 {
        long_prompt(target.addr, long)?;
    } else {
        throughput(target.addr)?;
    }
    if let Some(server) = target.server {
        server.shutdown()?;
    }
    Ok(())
}
