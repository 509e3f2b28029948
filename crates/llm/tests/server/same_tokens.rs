//! Issue #28, "same request, same tokens", end to end through the server: the same
//! request gives the same text, token count and finish reason however the server runs it.
//!
//! The CPU backend is row-invariant for block-quantized weights (a token's logits are
//! bit-identical whether the prompt ran in one step, in chunks, from the slot's prompt
//! cache, or in a batched decode step beside other sessions), so each request here must
//! give exactly what it gave cold (a fresh server) when it runs:
//!
//! - **warm**: again on the same server, all but the last prompt token from the slot's
//!   prompt cache (the last one runs as a one-token prefill);
//! - **partly warm**: after a request that shares only a prefix of its prompt, so the
//!   cache holds that prefix, computed in another run;
//! - **chunked**: on a model whose step arena holds 5 tokens, so the prompt is prefilled
//!   in chunks of 5;
//! - **beside others**: while 3 other requests decode, batched with them (their lengths
//!   differ, so the batch shrinks under it); once started strictly after the others
//!   (checked to have shared decode steps with them through `/metrics`), once from 4
//!   client threads at once;
//! - **streamed**: as server-sent events (cold, warm and beside others), whose deltas
//!   concatenate to the same text with the same finish reason.
//!
//! The model is a random Q8_0 llama (block-quantized: the float formats are not
//! row-invariant yet) on 2 worker threads, large enough that the worker pool splits
//! its matrices: a quantized product splits a matrix when it holds two tasks of 64 KiB
//! of weight bytes (64 KiB over the rows of activations, up to 8, in a prefill), which
//! at dim 512 and ffn 1536 every matrix but K and V does in decode and every matrix
//! does in a prefill of 5 or more rows; GQA (8 query heads over 2 KV heads) runs the
//! grouped attention.

use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier, OnceLock};

use anyhow::{Context, ensure};
use serde_json::{Value, json};
use tempra_llm::ModelFile;
use tempra_llm::engine::{ArenaCapacity, LoadOptions, Model};
use tempra_llm::gguf::Limits;
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

use crate::fixtures::{TestServer, metric, start, wait_health};
use crate::http_client::{get, read_chunk, read_head, request, send};

/// The model: see the module docs for why this size.
const SHAPE: &str = "dim=512,layers=2,heads=8,kv_heads=2,ffn=1536,vocab=2048,context=256";
/// Worker threads of the engine.
const THREADS: usize = 2;
/// KV slots of every server (the requests of one batched decode step at most).
const SLOTS: usize = 4;
/// Context of each slot.
const CONTEXT: usize = 192;
/// Tokens one step runs on the chunked model (prompts longer than this run in chunks).
const CHUNK: usize = 5;

/// The model loaded twice: with the default step arena, and with one of [`CHUNK`]
/// tokens. Made once per test binary (quantizing it takes a moment).
struct Models {
    whole: Arc<Model>,
    chunked: Arc<Model>,
}

fn models() -> &'static Models {
    static MODELS: OnceLock<Models> = OnceLock::new();
    MODELS.get_or_init(|| {
        let shape = ModelShape::parse(SHAPE).expect("shape");
        let spec = RandomModelSpec::llama(shape)
            .with_qtype(QuantType::Q8_0)
            .with_seed(28);
        let bytes = Arc::new(write_random_model(&spec, Vec::new()).expect("random model"));
        let load = |arena: Option<ArenaCapacity>| {
            let file = ModelFile::from_gguf_bytes(bytes.clone(), &Limits::default()).expect("file");
            let options = LoadOptions {
                threads: Some(THREADS),
                context_length: Some(CONTEXT),
                batch_sessions: SLOTS,
                arena,
                ..LoadOptions::default()
            };
            let model = Model::from_file(file, &options).expect("load");
            assert_eq!(model.executor().threads(), THREADS);
            model
        };
        Models {
            whole: load(None),
            chunked: load(Some(ArenaCapacity {
                max_batch_tokens: CHUNK,
                max_logit_rows: SLOTS,
            })),
        }
    })
}

/// A fresh server (empty slots) over `model`.
fn fresh(model: &Arc<Model>) -> anyhow::Result<TestServer> {
    start(Arc::clone(model), |c| {
        c.slots = SLOTS;
        c.queue = 8;
    })
}

/// A request: its endpoint and JSON body (without `stream`).
#[derive(Clone, Debug)]
struct Request {
    path: &'static str,
    body: Value,
}

fn completion(body: Value) -> Request {
    Request {
        path: "/v1/completions",
        body,
    }
}

fn chat(body: Value) -> Request {
    Request {
        path: "/v1/chat/completions",
        body,
    }
}

/// What must be the same every time.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    text: String,
    finish_reason: String,
    completion_tokens: u64,
}

/// An outcome and the prompt-cache usage of the run.
#[derive(Debug)]
struct Run {
    outcome: Outcome,
    prompt_tokens: u64,
    cached_tokens: u64,
}

impl Request {
    /// The body to send, streamed (with the usage chunk) or not.
    fn body(&self, stream: bool) -> String {
        let mut body = self.body.clone();
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body.to_string()
    }

    /// The text of a choice of a whole response or of a chunk.
    fn text_of<'a>(&self, choice: &'a Value, stream: bool) -> Option<&'a str> {
        match (self.path, stream) {
            ("/v1/completions", _) => choice["text"].as_str(),
            (_, false) => choice["message"]["content"].as_str(),
            (_, true) => choice["delta"]["content"].as_str(),
        }
    }

    /// Sends the request on a fresh connection.
    fn send(&self, addr: SocketAddr, stream: bool) -> anyhow::Result<TcpStream> {
        send(addr, "POST", self.path, Some(self.body(stream).as_bytes()))
    }

    /// Runs the request and reads its whole response.
    fn run(&self, addr: SocketAddr, stream: bool) -> anyhow::Result<Run> {
        let reply = request(addr, "POST", self.path, Some(&self.body(stream)))?;
        ensure!(
            reply.status == 200,
            "{} {}: {}",
            self.path,
            reply.status,
            reply.body
        );
        if stream {
            self.parse_stream(&reply.body)
        } else {
            self.parse_whole(&reply.json()?)
        }
    }

    fn parse_whole(&self, body: &Value) -> anyhow::Result<Run> {
        let choice = &body["choices"][0];
        let usage = &body["usage"];
        Ok(Run {
            outcome: Outcome {
                text: self.text_of(choice, false).context("no text")?.to_owned(),
                finish_reason: choice["finish_reason"]
                    .as_str()
                    .context("no finish_reason")?
                    .to_owned(),
                completion_tokens: usage["completion_tokens"].as_u64().context("usage")?,
            },
            prompt_tokens: usage["prompt_tokens"].as_u64().context("usage")?,
            cached_tokens: usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .context("cached_tokens")?,
        })
    }

    /// The deltas of a server-sent-event body concatenated, its one finish reason and
    /// the usage chunk.
    fn parse_stream(&self, body: &str) -> anyhow::Result<Run> {
        let data: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        ensure!(data.last() == Some(&"[DONE]"), "no [DONE]: {body}");
        let chunks: Vec<Value> = data[..data.len() - 1]
            .iter()
            .map(|d| serde_json::from_str(d))
            .collect::<Result<_, _>>()?;
        let text: String = chunks
            .iter()
            .filter_map(|c| self.text_of(&c["choices"][0], true))
            .collect();
        let finish: Vec<&str> = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
            .collect();
        ensure!(finish.len() == 1, "not one finish_reason: {body}");
        let usage = &chunks.last().context("no chunks")?["usage"];
        Ok(Run {
            outcome: Outcome {
                text,
                finish_reason: finish[0].to_owned(),
                completion_tokens: usage["completion_tokens"].as_u64().context("usage")?,
            },
            prompt_tokens: usage["prompt_tokens"].as_u64().context("usage")?,
            cached_tokens: usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .context("cached_tokens")?,
        })
    }
}

/// `tempra_decode_steps_total` of a server.
fn decode_steps(addr: SocketAddr) -> anyhow::Result<u64> {
    wait_health(addr, |h| h["slots_processing"] == 0)?;
    let metrics = get(addr, "/metrics")?.body;
    Ok(metric(&metrics, "tempra_decode_steps_total").context("decode steps")? as u64)
}

/// Three streamed requests started one after another (each read to its first chunk, so
/// each holds a slot and decodes), then `main` (whole), then the rest of the three;
/// checks through `/metrics` that `main` shared decode steps with them and returns
/// `main`'s run and the three outcomes.
fn main_after_others(
    addr: SocketAddr,
    main: &Request,
    others: &[Request; 3],
) -> anyhow::Result<(Run, Vec<Outcome>)> {
    let steps_before = decode_steps(addr)?;
    let mut readers = Vec::new();
    for other in others {
        let mut reader = BufReader::new(other.send(addr, true)?);
        let (status, _) = read_head(&mut reader)?;
        ensure!(status == 200, "{other:?}: {status}");
        let first = read_chunk(&mut reader)?.context("no first chunk")?;
        readers.push((reader, first));
    }
    let run = main.run(addr, false)?;
    let mut outcomes = Vec::new();
    for ((mut reader, mut body), other) in readers.into_iter().zip(others) {
        while let Some(chunk) = read_chunk(&mut reader)? {
            body.extend(chunk);
        }
        outcomes.push(other.parse_stream(&String::from_utf8(body)?)?.outcome);
    }
    let steps = decode_steps(addr)? - steps_before;
    // Had `main` decoded alone, its decode steps (one per token after the first) and the
    // others' could not overlap.
    let alone = run.outcome.completion_tokens - 1;
    let longest_other = outcomes.iter().map(|o| o.completion_tokens - 1).max();
    let longest_other = longest_other.unwrap_or(0);
    ensure!(
        steps < alone + longest_other,
        "main never shared a decode step: {steps} steps, {alone} + {longest_other} alone"
    );
    Ok((run, outcomes))
}

/// `main` and the three others from four client threads at once (`main` streamed).
fn all_at_once(
    addr: SocketAddr,
    main: &Request,
    others: &[Request; 3],
) -> anyhow::Result<(Run, Vec<Outcome>)> {
    let barrier = Barrier::new(4);
    let barrier = &barrier;
    std::thread::scope(|scope| {
        let main = scope.spawn(move || {
            barrier.wait();
            main.run(addr, true)
        });
        let others: Vec<_> = others
            .iter()
            .map(|other| {
                scope.spawn(move || {
                    barrier.wait();
                    other.run(addr, false).map(|r| r.outcome)
                })
            })
            .collect();
        let main = main.join().expect("client thread")?;
        let others = others
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect::<anyhow::Result<_>>()?;
        Ok((main, others))
    })
}

/// Runs `main` every way of the module docs and checks each gives its cold outcome;
/// `sharer` shares a prefix of `main`'s prompt (and only a prefix); `others` run beside
/// it. Returns the cold outcome.
fn same_every_way(
    main: &Request,
    sharer: &Request,
    others: &[Request; 3],
) -> anyhow::Result<Outcome> {
    let models = models();
    let check = |way: &str, got: &Outcome, cold: &Outcome| {
        assert_eq!(
            got, cold,
            "{way} differs from cold for {} {}",
            main.path, main.body
        );
    };

    // Cold: a fresh server.
    let server = fresh(&models.whole)?;
    let cold_run = main.run(server.addr, false)?;
    let cold = cold_run.outcome.clone();
    assert_eq!(cold_run.cached_tokens, 0, "a fresh slot caches nothing");
    assert!(
        !cold.text.is_empty() && cold.completion_tokens > 0,
        "nothing generated: {cold:?}"
    );
    let n_prompt = cold_run.prompt_tokens;
    assert!(
        n_prompt > 2 * CHUNK as u64,
        "the prompt should span several chunks: {n_prompt} tokens"
    );

    // Warm: the same server again, whole and streamed; all but the last prompt token
    // come from the slot's cache.
    for stream in [false, true] {
        let warm = main.run(server.addr, stream)?;
        assert_eq!(warm.cached_tokens, n_prompt - 1, "stream {stream}");
        check(&format!("warm (stream {stream})"), &warm.outcome, &cold);
    }
    drop(server);

    // Cold, streamed.
    let server = fresh(&models.whole)?;
    let streamed = main.run(server.addr, true)?;
    assert_eq!(streamed.cached_tokens, 0);
    check("cold streamed", &streamed.outcome, &cold);

    // Partly warm: `sharer` takes the slot holding `main` (the longest common prefix)
    // and leaves its own tokens there; `main` then finds only the shared prefix.
    let shared = sharer.run(server.addr, false)?;
    assert!(
        shared.cached_tokens > 0,
        "the sharer should reuse main's prefix"
    );
    let partial = main.run(server.addr, false)?;
    assert!(
        partial.cached_tokens > 1 && partial.cached_tokens < n_prompt - 1,
        "a partial prompt-cache hit: {} of {n_prompt} tokens cached",
        partial.cached_tokens
    );
    check("partly warm", &partial.outcome, &cold);
    drop(server);

    // Chunked prefill.
    let server = fresh(&models.chunked)?;
    let chunked = main.run(server.addr, false)?;
    assert_eq!(chunked.cached_tokens, 0);
    check("chunked", &chunked.outcome, &cold);
    drop(server);

    // Beside others, cold: started after the three others.
    let server = fresh(&models.whole)?;
    let (beside, cold_others) = main_after_others(server.addr, main, others)?;
    // (The shortest other may have ended before `main` came: its slot shares the BOS.)
    assert!(beside.cached_tokens <= 1, "{beside:?}");
    check("beside others (cold)", &beside.outcome, &cold);
    for other in &cold_others {
        assert!(!other.text.is_empty(), "{other:?}");
    }

    // Beside others again, from four client threads at once (`main` streamed), each on
    // whichever free slot it finds first: its own (warm) or one holding another prompt
    // (sharing the BOS). The others too must give what they gave the first time.
    let (beside, at_once_others) = all_at_once(server.addr, main, others)?;
    check("beside others (at once, streamed)", &beside.outcome, &cold);
    for (i, (got, cold)) in at_once_others.iter().zip(&cold_others).enumerate() {
        assert_eq!(got, cold, "other {i} at once ({})", others[i].body);
    }

    // Beside others, warm: started after the three others again; each request finds
    // the slot holding its own prompt (the one it ran in last).
    let (beside, warm_others) = main_after_others(server.addr, main, others)?;
    assert_eq!(beside.cached_tokens, n_prompt - 1);
    check("beside others (warm)", &beside.outcome, &cold);
    for (i, (got, cold)) in warm_others.iter().zip(&cold_others).enumerate() {
        assert_eq!(got, cold, "other {i} warm ({})", others[i].body);
    }
    Ok(cold)
}

/// Three greedy completions of different prompts and lengths to run beside the one
/// under test (ending before it, with it and after it, so its batch shrinks). The
/// longest runs long enough that the one under test joins it even when the machine is
/// so loaded that the test's client is slow to send it (the check that they shared
/// decode steps relies on it).
fn others() -> [Request; 3] {
    [
        ("a little bird sang", 8),
        ("the old man and the sea, said she", 200),
        ("we went home", 20),
    ]
    .map(|(prompt, max_tokens)| {
        completion(json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": true}))
    })
}

const PROMPT: &str = "once upon a time there was a quick brown fox who lived by the river";
const SHARER: &str = "once upon a time there was a big red dog";

#[test]
fn greedy_completion_is_the_same_cold_warm_chunked_and_beside_others() -> anyhow::Result<()> {
    let request =
        |prompt: &str| completion(json!({"prompt": prompt, "max_tokens": 28, "temperature": 0}));
    let full = same_every_way(&request(PROMPT), &request(SHARER), &others())?;
    assert_eq!(full.finish_reason, "length", "{full:?}");

    // Again with a stop string the text is known to hold (two letters from its middle),
    // so that the finish reason is "stop" every way too.
    let chars: Vec<char> = full.text.chars().collect();
    let stop: String = (chars.len() / 2..chars.len() - 1)
        .map(|i| &chars[i..i + 2])
        .find(|w| w.iter().all(char::is_ascii_alphabetic))
        .context("no two letters in the second half of the text")?
        .iter()
        .collect();
    let cut = &full.text[..full.text.find(&stop).expect("stop in the text")];
    let mut with_stop = request(PROMPT);
    with_stop.body["stop"] = json!([stop]);
    let stopped = same_every_way(&with_stop, &request(SHARER), &others())?;
    assert_eq!(stopped.finish_reason, "stop", "{stopped:?}, stop {stop:?}");
    assert_eq!(stopped.text, cut);
    Ok(())
}

#[test]
fn seeded_sampling_is_the_same_cold_warm_chunked_and_beside_others() -> anyhow::Result<()> {
    let request = |prompt: &str, seed: u64| {
        completion(json!({
            "prompt": prompt, "max_tokens": 28, "temperature": 0.8, "top_p": 0.9, "top_k": 40,
            "seed": seed,
        }))
    };
    let cold = same_every_way(&request(PROMPT, 1234), &request(SHARER, 1234), &others())?;
    // The seed really drives the sampling: another seed gives another text.
    let server = fresh(&models().whole)?;
    let other_seed = request(PROMPT, 4321).run(server.addr, false)?;
    assert_ne!(
        other_seed.outcome.text, cold.text,
        "seeds 1234 and 4321 sampled the same text"
    );
    Ok(())
}

/// The servers here get the fixtures' chat template (the random model has none).
#[test]
fn greedy_chat_is_the_same_cold_warm_chunked_and_beside_others() -> anyhow::Result<()> {
    let request = |user: &str| {
        chat(json!({
            "messages": [{"role": "system", "content": "you tell short stories"},
                         {"role": "user", "content": user}],
            "max_tokens": 24, "temperature": 0,
        }))
    };
    same_every_way(
        &request("tell me about a fox by the river"),
        &request("tell me about a dog"),
        &others(),
    )?;
    Ok(())
}
