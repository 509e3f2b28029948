//! An OpenAI-compatible HTTP server over one loaded [`Model`](crate::engine::Model), with
//! several KV slots served by continuous batching (feature `server`).
//!
//! - Endpoints: `POST /v1/completions`, `POST /v1/chat/completions` (both with
//!   `"stream": true` as server-sent events: `data: {chunk}` lines, then
//!   `data: [DONE]`), `GET /v1/models` (the model's id is its file stem; requests naming
//!   any model are served by the loaded one), `GET /health` and `GET /metrics`
//!   (Prometheus text).
//! - Slots: `slots` sessions, each with its KV cache allocated once at startup (after a
//!   check that they fit in memory next to the weights). Requests beyond the slots wait
//!   in a queue of `queue`; beyond that they get 429 at once.
//! - One engine thread owns the slots: it admits waiting requests into free slots
//!   (prefilling the prompt after the prefix the slot already holds: the prompt cache),
//!   and runs one batched decode step per iteration for every active slot
//!   ([`step_batch`](crate::engine::step_batch): one read of the weights for all).
//!   The HTTP side runs on a tokio runtime of its own threads and talks to the engine
//!   over channels; a client that disconnects frees its slot before the next step.
//! - Sampling fields: `max_tokens` (or `max_completion_tokens`), `temperature`, `top_p`,
//!   `top_k`, `min_p`, `seed`, `stop` (a string or a list), `repetition_penalty`
//!   (alias `repeat_penalty`), `frequency_penalty`, `presence_penalty`, `n` (only 1),
//!   `stream`, `stream_options.include_usage`, and llama.cpp's `ignore_eos`. Defaults
//!   are [`SamplerConfig`](crate::engine::SamplerConfig)'s; without a `seed` each
//!   request draws one.
//! - Errors are OpenAI-style JSON, `{"error": {"message", "type", "param", "code"}}`:
//!   400 for malformed JSON, fields of the wrong type or out of range, `n` ≠ 1, an
//!   empty prompt or one that leaves no room in the context (`context_length_exceeded`);
//!   413 for a body over `max_body_bytes`; 429 when the queue is full.
//!
//! ```no_run
//! use std::net::TcpListener;
//! use tempra_llm::engine::{LoadOptions, Model};
//! use tempra_llm::server::{Server, ServerConfig};
//!
//! let model = Model::load("model.gguf", &LoadOptions::default())?;
//! let config = ServerConfig { slots: 4, ..ServerConfig::new("model") };
//! let server = Server::start(model, config, TcpListener::bind("127.0.0.1:8080")?)?;
//! println!("listening on http://{}", server.local_addr());
//! server.wait()?; // until Ctrl-C
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod admission;
mod errors;
mod memory_guard;
mod metrics;
mod openai;
mod routes;
mod running;
mod scheduler;
mod slot;
mod sse;
mod state;
mod stop_text;

pub use running::Server;

/// The default number of KV slots.
pub const DEFAULT_SLOTS: usize = 4;
/// The default queue length (requests waiting for a slot).
pub const DEFAULT_QUEUE: usize = 16;
/// The default request body limit (1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;

/// How to run a [`Server`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// The model's id in `/v1/models` and in responses (the CLI uses the file stem).
    pub model_id: String,
    /// KV slots: requests served at once.
    pub slots: usize,
    /// Requests that may wait for a slot; more get 429.
    pub queue: usize,
    /// Request bodies over this many bytes get 413.
    pub max_body_bytes: usize,
    /// A chat template to use instead of the model's `tokenizer.chat_template`.
    pub chat_template: Option<String>,
    /// Threads of the HTTP runtime (the engine has its own).
    pub http_threads: usize,
    /// Shut down on SIGINT/SIGTERM (the CLI); tests leave signals alone.
    pub handle_signals: bool,
}

impl ServerConfig {
    /// The defaults for a model called `model_id`: [`DEFAULT_SLOTS`] slots, a queue of
    /// [`DEFAULT_QUEUE`], [`DEFAULT_MAX_BODY_BYTES`], the model's own template, two HTTP
    /// threads, no signal handling.
    pub fn new(model_id: impl Into<String>) -> ServerConfig {
        ServerConfig {
            model_id: model_id.into(),
            slots: DEFAULT_SLOTS,
            queue: DEFAULT_QUEUE,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            chat_template: None,
            http_threads: 2,
            handle_signals: false,
        }
    }
}
