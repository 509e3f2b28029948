//! An OpenAI-compatible HTTP server over one loaded [`Model`](crate::engine::Model), with
//! several KV slots served by continuous batching (feature `server`).
//!
//! - Endpoints: `POST /v1/completions`, `POST /v1/chat/completions`,
//!   `POST /v1/embeddings` (the first two with
//!   `"stream": true` as server-sent events: `data: {chunk}` lines, then
//!   `data: [DONE]`), `GET /v1/models` (the model's id is its file stem; requests naming
//!   any model are served by the loaded one), `GET /health`, `GET /metrics`
//!   (Prometheus text) and llama-server's `POST /tokenize`, `POST /detokenize`,
//!   `POST /apply-template`, `GET /props` and `GET /slots`.
//! - Slots: `slots` sessions, each with its KV cache allocated once at startup (after a
//!   check that they fit in memory next to the weights). Requests beyond the slots wait
//!   in a queue of `queue`; beyond that they get 429 at once. A waiting request whose
//!   client disconnects leaves the queue at once.
//! - One engine thread owns the slots: it admits waiting requests into free slots
//!   (keeping the prefix the slot already holds: the prompt cache) and runs one mixed
//!   step per iteration ([`step_spans`](crate::engine::step_spans): one read of the
//!   weights for all): a decode row for every generating slot and chunks of the waiting
//!   prompts, sized so that the step takes about [`ServerConfig::prefill_gap_percent`]
//!   of a decode-only step while a stream decodes (chunked prefill: decode never waits
//!   for a whole prompt); a prompt scored for `echo`/logprobs goes in the same way, its
//!   chunks bringing every position's logits back. Embeddings run whole.
//!   The HTTP side runs on a tokio runtime of its own threads and talks to the engine
//!   over channels; a client that disconnects frees its slot before the next step.
//! - Connections: HTTP/1.1 on hyper, under an accept loop of its own. A request head
//!   must arrive within [`ServerConfig::header_timeout`], its body within
//!   [`ServerConfig::body_timeout`] (else 408), and a kept-alive connection idles at most
//!   [`ServerConfig::idle_timeout`]. At [`ServerConfig::max_connections`], or when the
//!   process runs out of file descriptors, the connection that has waited longest
//!   without a request in progress is closed to admit the new one; when every
//!   connection has a request in progress a new one gets 503. A `Content-Length` over
//!   `max_body_bytes` gets 413 before any of the body is read. Shutdown refuses new
//!   generations (503 with `Retry-After`), closes idle connections, lets running
//!   requests finish for up to [`ServerConfig::drain_timeout`] while new connections
//!   get one 503 each (`/health` says `draining`), then closes every socket.
//! - Readiness for load balancers: `GET /health` is 200 `ok` when serving, 503
//!   `draining` during the drain, and 503 `loading` from a [`LoadingServer`], which
//!   holds the socket while the model loads and hands it to [`Server::start`]
//!   (`tempra serve` does; `deploy/` runs replicas behind HAProxy).
//! - Who may call: with [`ServerConfig::api_keys`], every endpoint but `/health` needs
//!   `Authorization: Bearer KEY` (compared in constant time; 401 otherwise), and
//!   [`ServerConfig::api_key_concurrency`] bounds each key's requests in flight. A
//!   request carrying an `Origin` not in [`ServerConfig::cors_origins`] is refused (403),
//!   allowed origins get CORS headers and preflights; a `Host` that is not an IP
//!   address, `localhost` or one of [`ServerConfig::allowed_hosts`] is refused (403, DNS
//!   rebinding). Clients that send no `Origin` (curl, SDKs) are not affected.
//! - Message text stays text: chat prompts are tokenized with
//!   [`ChatTemplate::prompt_tokens`](crate::chat::ChatTemplate::prompt_tokens), so
//!   control-token text inside messages is plain text; roles other than
//!   [`STANDARD_ROLES`] and [`ServerConfig::extra_roles`] get 400 naming
//!   `messages[i].role`. A raw `/v1/completions` prompt keeps special-token parsing:
//!   the caller writes the whole prompt.
//! - Sampling fields: `max_tokens` (or `max_completion_tokens`), `temperature`, `top_p`,
//!   `top_k`, `min_p`, `seed`, `stop` (a string or a list), `repetition_penalty`
//!   (alias `repeat_penalty`), `frequency_penalty`, `presence_penalty`, `logit_bias`,
//!   `n` (continuations forked from one prefill), `stream`,
//!   `stream_options.include_usage`, and llama.cpp's
//!   `ignore_eos`; `logprobs`/`top_logprobs` and completions' `echo` report the raw
//!   model's log-probabilities (`docs/serving.md` has the fields). Defaults
//!   are [`SamplerConfig`](crate::engine::SamplerConfig)'s; without a `seed` each
//!   request draws one.
//! - Errors are OpenAI-style JSON, `{"error": {"message", "type", "param", "code"}}`:
//!   400 for malformed JSON, fields of the wrong type or out of range, `n` above the
//!   slots, an
//!   empty prompt or one that leaves no room in the context (`context_length_exceeded`);
//!   401 (`invalid_api_key`), 403 (`origin_not_allowed`, `host_not_allowed`), 408
//!   (`request_timeout`), 413 (`request_too_large`), 429 (type and code
//!   `rate_limit_exceeded`, with `Retry-After`) and 503 (with `Retry-After`) while
//!   loading or shutting down.
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

mod accept;
mod admission;
mod api_keys;
mod bodies;
mod browser;
mod choices;
mod chunk_pacer;
mod connections;
mod embeddings;
mod errors;
mod gate;
mod info_routes;
mod logprob_json;
mod memory_guard;
mod metrics;
mod openai;
mod readiness;
mod reply_stream;
mod routes;
mod running;
mod scheduler;
mod slot;
mod slot_board;
mod sse;
mod state;
mod stop_text;
mod structured;
mod termination;
mod tracked_io;

use std::time::Duration;

use crate::engine::Pooling;

pub use api_keys::ApiKey;
pub use readiness::LoadingServer;
pub use running::Server;

/// The default number of KV slots.
pub const DEFAULT_SLOTS: usize = 4;
/// The default queue length (requests waiting for a slot).
pub const DEFAULT_QUEUE: usize = 16;
/// The default request body limit (1 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;
/// The default time a request head may take to arrive (10 s).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time a request body may take to arrive after its head (30 s).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time a kept-alive connection may idle between requests (30 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The default cap on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// The default time running requests get to finish at shutdown (10 s).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The default [`ServerConfig::prefill_gap_percent`]: a step that carries prompt tokens
/// while a stream decodes takes about 2.5 decode-only steps.
pub const DEFAULT_PREFILL_GAP_PERCENT: u32 = 250;
/// The roles a chat message may have without `--allow-role`.
pub const STANDARD_ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

/// How to run a [`Server`]. Its `Debug` form hides the API keys.
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
    /// Shut down on SIGINT/SIGTERM (the CLI; a second signal cuts the drain short);
    /// tests leave signals alone. The signals are counted from the server's start, or
    /// from a [`LoadingServer::start_handling_signals`] before it, so none that comes in
    /// between is lost.
    pub handle_signals: bool,
    /// A request head (request line and headers) must arrive within this time of the
    /// connection opening or of its first byte; otherwise the connection is closed.
    pub header_timeout: Duration,
    /// A request body must arrive within this time of its head; otherwise 408 and the
    /// connection is closed.
    pub body_timeout: Duration,
    /// A kept-alive connection idle for this long is closed.
    pub idle_timeout: Duration,
    /// The most connections open at once; at the cap the connection that has waited
    /// longest without a request in progress is closed to admit a new one.
    pub max_connections: usize,
    /// At shutdown, running requests get this long to finish before every connection is
    /// closed.
    pub drain_timeout: Duration,
    /// While a stream decodes, a step that also carries prompt tokens (chunked prefill)
    /// is sized to take this percentage of a decode-only step (within half a token's
    /// cost; `chunk_pacer`): the streams' gap
    /// between tokens against a long prompt's time to first token (larger: longer gaps,
    /// and a prompt's time to first token closer to its time alone). At least 110.
    pub prefill_gap_percent: u32,
    /// Keys a client must present as `Authorization: Bearer KEY` (empty: no
    /// authentication). `/health` stays open.
    pub api_keys: Vec<ApiKey>,
    /// The most generation requests one API key may have running or queued at once
    /// (`None`: no limit beyond the slots and the queue).
    pub api_key_concurrency: Option<usize>,
    /// Origins whose web pages may call the server (`*`: any); requests carrying another
    /// `Origin` are refused.
    pub cors_origins: Vec<String>,
    /// Host names the server answers besides IP addresses and `localhost` (DNS
    /// rebinding protection): `name`, `*.name` for its subdomains, or `*` for any.
    pub allowed_hosts: Vec<String>,
    /// Chat message roles accepted besides [`STANDARD_ROLES`].
    pub extra_roles: Vec<String>,
    /// How `/v1/embeddings` pools a sequence (`None`: the model's `pooling_type`, else
    /// mean).
    pub pooling: Option<Pooling>,
}

impl ServerConfig {
    /// The defaults for a model called `model_id`: [`DEFAULT_SLOTS`] slots, a queue of
    /// [`DEFAULT_QUEUE`], [`DEFAULT_MAX_BODY_BYTES`], the model's own template, two HTTP
    /// threads, no signal handling, the `DEFAULT_*` timeouts, connection cap and prefill
    /// gap, no API
    /// keys, no CORS origins, no extra hosts or roles.
    pub fn new(model_id: impl Into<String>) -> ServerConfig {
        ServerConfig {
            model_id: model_id.into(),
            slots: DEFAULT_SLOTS,
            queue: DEFAULT_QUEUE,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            chat_template: None,
            http_threads: 2,
            handle_signals: false,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            prefill_gap_percent: DEFAULT_PREFILL_GAP_PERCENT,
            api_keys: Vec::new(),
            api_key_concurrency: None,
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            extra_roles: Vec::new(),
            pooling: None,
        }
    }
}
