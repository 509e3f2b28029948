//! What a prompt costs when it goes in small chunks, alone or beside a decode row: the
//! engine-level limit of the serving targets of docs/serving.md (a stream's largest gap
//! at most 3x its median gap, a long prompt's time to first token at most 1.25x its time
//! alone).
//!
//! `cargo bench -p tempra-llm --bench chunk_cost` runs, at one depth of a prompt, the
//! same `SPAN` prompt positions three ways, in rounds that alternate them: in one step
//! (the way a prompt alone goes in), in chunks of `k` tokens, and in chunks of `k`
//! tokens each beside one decode row of another session (a mixed step: what a prompt
//! beside a stream runs). For each `k` it prints the mixed step's time over a decode-only
//! step's (the stream's gap in decode steps) and the chunks' time over the one step's
//! (the prompt's slowdown). The chunks that keep the gap within the target give the
//! smallest slowdown that steps of one decode row and one prompt chunk can reach on
//! this machine, whatever chunk size a scheduler picks.
//!
//! Environment:
//! - `TEMPRA_CHUNK_BENCH_MODEL`: a GGUF file; otherwise a random-weight model of
//!   `TEMPRA_CHUNK_BENCH_SHAPE` (default `110m`, Q4_0; the serving target names the `1b`
//!   shape, which `cargo xtask make-model --shape 1b --dtype q4_0` writes);
//! - `TEMPRA_CHUNK_BENCH_THREADS`: engine threads (default: physical cores);
//! - `TEMPRA_CHUNK_BENCH_DEPTH`: prompt positions before the measured ones (default 512);
//! - `TEMPRA_CHUNK_BENCH_CHUNKS`: the chunk sizes (default `4,7,8,15,16,23,24,32`);
//! - `TEMPRA_CHUNK_BENCH_ROUNDS`: rounds (default 3); each figure is the median.

use std::time::{Duration, Instant};

use anyhow::Context;

use tempra_llm::engine::{Session, step_spans};

mod common;
use common::{bench_model, env_usize, median};

/// Prompt positions measured after the depth (one step holds them all; a chunk size that
/// does not divide them ends with a shorter chunk).
const SPAN: usize = 256;
/// The stream's largest gap the serving target allows, in decode-only steps.
const GAP_TARGET: f64 = 3.0;
/// Decode-only steps timed per round.
const DECODE_STEPS: usize = 16;

/// The prompt's tokens: ids spread over a small vocabulary's common range.
fn tokens(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| 300 + (i.wrapping_mul(7919).wrapping_add(seed * 31)) % 5000)
        .collect()
}

/// Time of `span` going into `prompt` (at `depth`) in chunks of `k` tokens, each beside
/// one decode row of `stream` when given; the positions are dropped again after.
fn chunked(
    prompt: &mut Session,
    mut stream: Option<&mut Session>,
    depth: usize,
    span: &[u32],
    k: usize,
) -> anyhow::Result<Duration> {
    let began = Instant::now();
    for chunk in span.chunks(k) {
        match stream.as_deref_mut() {
            Some(stream) => {
                step_spans(&mut [&mut *stream, &mut *prompt], &[&[400], chunk])?;
                stream.truncate(stream.len() - 1);
            }
            None => {
                step_spans(&mut [&mut *prompt], &[chunk])?;
            }
        }
    }
    let took = began.elapsed();
    prompt.truncate(depth);
    Ok(took)
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(()); // `cargo test --benches` lists benchmarks; this one is a program.
    }
    let depth = env_usize("TEMPRA_CHUNK_BENCH_DEPTH", 512);
    let rounds = env_usize("TEMPRA_CHUNK_BENCH_ROUNDS", 3).max(1);
    let list = std::env::var("TEMPRA_CHUNK_BENCH_CHUNKS")
        .unwrap_or_else(|_| "4,7,8,15,16,23,24,32".into());
    let chunks: Vec<usize> = list
        .split(',')
        .map(|k| k.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .ok()
        .filter(|c: &Vec<usize>| c.iter().all(|k| (1..SPAN).contains(k)))
        .with_context(|| {
            format!(
                "TEMPRA_CHUNK_BENCH_CHUNKS {list:?}: chunk sizes from 1 to {} by commas",
                SPAN - 1
            )
        })?;
    let (model, what, _dir) = bench_model("TEMPRA_CHUNK_BENCH", depth + SPAN + 64)?;
    println!(
        "{what}, {} threads: {SPAN} prompt positions from depth {depth}, {rounds} rounds (medians)",
        model.threads()
    );
    let mut prompt = model.session()?;
    let mut stream = model.session()?;
    stream.prefill(&tokens(16, 1))?;
    for part in tokens(depth, 2).chunks(SPAN) {
        prompt.prefill(part)?;
    }
    let span = tokens(SPAN, 3);
    let mut decode = Vec::new();
    let mut whole = Vec::new();
    let mut alone = vec![Vec::new(); chunks.len()];
    let mut beside = vec![Vec::new(); chunks.len()];
    for _ in 0..rounds {
        for _ in 0..DECODE_STEPS {
            let began = Instant::now();
            step_spans(&mut [&mut stream], &[&[400]])?;
            decode.push(began.elapsed().as_secs_f64());
            stream.truncate(stream.len() - 1);
        }
        whole.push(chunked(&mut prompt, None, depth, &span, SPAN)?.as_secs_f64());
        for (i, &k) in chunks.iter().enumerate() {
            alone[i].push(chunked(&mut prompt, None, depth, &span, k)?.as_secs_f64());
            let mixed = chunked(&mut prompt, Some(&mut stream), depth, &span, k)?;
            beside[i].push(mixed.as_secs_f64());
        }
    }
    let decode = median(decode);
    let whole = median(whole);
    println!(
        "decode-only step {:.2} ms; the {SPAN} positions in one step {:.0} ms ({:.2} ms a token)",
        decode * 1e3,
        whole * 1e3,
        whole * 1e3 / SPAN as f64
    );
    let mut best: Option<(usize, f64)> = None;
    for (i, &k) in chunks.iter().enumerate() {
        let steps = SPAN.div_ceil(k) as f64;
        let (alone, beside) = (median(alone[i].clone()), median(beside[i].clone()));
        let gap = beside / steps / decode;
        let slowdown = beside / whole;
        println!(
            "chunks of {k:3}: alone {:6.2} ms a step ({:.2}x the one step); beside a decode row {:6.2} ms a step ({:.2}x), the stream's gap {:.2} decode steps (mean)",
            alone * 1e3 / steps,
            alone / whole,
            beside * 1e3 / steps,
            slowdown,
            gap,
        );
        if gap <= GAP_TARGET && best.is_none_or(|(_, s)| slowdown < s) {
            best = Some((k, slowdown));
        }
    }
    match best {
        Some((k, slowdown)) => println!(
            "within a gap of {GAP_TARGET} decode steps: the smallest slowdown is {slowdown:.2}x (chunks of {k})"
        ),
        None => println!("no chunk size keeps the gap within {GAP_TARGET} decode steps"),
    }
    Ok(())
}
