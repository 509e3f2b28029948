//! Tiny random models on disk, servers over them, and reference generations through the
//! engine API (what the server must reproduce).

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tempra_llm::chat::{ChatMessage, ChatTemplate};
use tempra_llm::engine::{Generation, LoadOptions, Model, Sampler, SamplerConfig, StopConditions};
use tempra_llm::server::{Server, ServerConfig};
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};
use tempra_llm::tokenizer::TokenizeOptions;

use crate::http_client::{get, read_chunk, read_head, send_with};

/// A simple ChatML-style template for the tests.
pub(crate) const TEMPLATE: &str = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";

/// A model file in a temporary directory.
pub(crate) struct ModelDir {
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

/// Writes a random llama model of `shape` as `tiny-model.gguf`.
pub(crate) fn model_file(shape: &str) -> anyhow::Result<ModelDir> {
    model_file_from(&RandomModelSpec::llama(ModelShape::parse(shape)?).with_seed(11))
}

/// Writes the random model `spec` describes as `tiny-model.gguf`.
pub(crate) fn model_file_from(spec: &RandomModelSpec) -> anyhow::Result<ModelDir> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tiny-model.gguf");
    std::fs::write(&path, write_random_model(spec, Vec::new())?)?;
    Ok(ModelDir { _dir: dir, path })
}

/// A model with a long context, for streams that outlast a test.
pub(crate) const LONG_CONTEXT: &str = "dim=64,layers=2,heads=4,ffn=128,vocab=400,context=4096";

/// Starts a stream of up to 4000 tokens (headers `headers`) and reads its head and
/// first chunk: from then on it holds a slot, or (with every slot busy) waits in the
/// queue once the head is read.
pub(crate) fn long_stream(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    first_chunk: bool,
) -> anyhow::Result<BufReader<TcpStream>> {
    let long = serde_json::json!({"prompt": "tell me", "max_tokens": 4000, "temperature": 0,
                                  "ignore_eos": true, "stream": true});
    let stream = send_with(
        addr,
        "POST",
        "/v1/completions",
        headers,
        Some(long.to_string().as_bytes()),
    )?;
    let mut reader = BufReader::new(stream);
    let (status, _) = read_head(&mut reader)?;
    anyhow::ensure!(status == 200, "the stream got {status}");
    if first_chunk {
        anyhow::ensure!(
            read_chunk(&mut reader)?.is_some(),
            "the stream ended at once"
        );
    }
    Ok(reader)
}

/// The small model most tests use.
pub(crate) const SMALL: &str = "dim=64,layers=2,heads=4,kv_heads=2,ffn=128,vocab=400,context=256";

/// Loads `dir`'s model with a context of `ctx`.
pub(crate) fn load(dir: &ModelDir, ctx: usize) -> anyhow::Result<Arc<Model>> {
    Ok(Model::load(
        &dir.path,
        &LoadOptions {
            threads: Some(1),
            context_length: Some(ctx),
            ..LoadOptions::default()
        },
    )?)
}

/// A running server and its model.
pub(crate) struct TestServer {
    pub(crate) server: Option<Server>,
    pub(crate) addr: SocketAddr,
    pub(crate) model: Arc<Model>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().expect("clean shutdown");
        }
    }
}

/// Starts a server on an ephemeral loopback port.
pub(crate) fn start(
    model: Arc<Model>,
    configure: impl FnOnce(&mut ServerConfig),
) -> anyhow::Result<TestServer> {
    let mut config = ServerConfig::new("tiny-model");
    config.chat_template = Some(TEMPLATE.to_owned());
    configure(&mut config);
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let server = Server::start(Arc::clone(&model), config, listener)?;
    let addr = server.local_addr();
    Ok(TestServer {
        server: Some(server),
        addr,
        model,
    })
}

/// Greedy text the engine generates alone for `prompt` tokens (ignoring end tokens).
pub(crate) fn reference(
    model: &Arc<Model>,
    prompt: &[u32],
    max_tokens: usize,
) -> anyhow::Result<String> {
    let mut session = model.session()?;
    let stop = StopConditions {
        max_tokens: Some(max_tokens),
        stop_strings: Vec::new(),
        ignore_eog: true,
    };
    let mut generation = Generation::new(
        &mut session,
        prompt,
        Sampler::new(SamplerConfig::greedy()),
        stop,
    )?;
    let mut text = String::new();
    for piece in generation.by_ref() {
        text.push_str(&piece?.text);
    }
    text.push_str(&generation.take_remaining_text());
    Ok(text)
}

/// The prompt tokens the server makes of a completions prompt.
pub(crate) fn completion_tokens(model: &Model, prompt: &str) -> Vec<u32> {
    model.vocab().tokenize(
        prompt,
        TokenizeOptions {
            add_special: true,
            parse_special: true,
        },
    )
}

/// The prompt tokens the server makes of a chat (with [`TEMPLATE`]).
pub(crate) fn chat_tokens(model: &Model, messages: &[ChatMessage]) -> anyhow::Result<Vec<u32>> {
    let template = ChatTemplate::new(TEMPLATE, "<s>", "</s>")?;
    let text = template.render(messages, true)?;
    Ok(model.vocab().tokenize(
        &text,
        TokenizeOptions {
            add_special: true,
            parse_special: true,
        },
    ))
}

/// Polls `GET /health` until `ready` holds for its JSON (or fails after a minute).
pub(crate) fn wait_health(
    addr: SocketAddr,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health = get(addr, "/health")?.json()?;
        if ready(&health) {
            return Ok(health);
        }
        if Instant::now() > deadline {
            return Err(anyhow::anyhow!("health never got there: {health}"))
                .context("waiting for /health");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The value of a metric line `name value` (or `name{labels} value`).
pub(crate) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (key, value) = l.rsplit_once(' ')?;
        (key == name).then(|| value.parse().ok())?
    })
}

/// Raises this process's soft limit on open files to `want` (at most the hard limit) and
/// returns the limit now in force.
pub(crate) fn raise_fd_limit(want: u64) -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `getrlimit` writes a `rlimit` into memory this function owns.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return 0;
        }
        if limit.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want.min(limit.rlim_max),
                rlim_max: limit.rlim_max,
            };
            // SAFETY: `setrlimit` reads a `rlimit` this function owns.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit = raised;
            }
        }
        limit.rlim_cur
    }
    #[cfg(not(unix))]
    {
        want
    }
}
