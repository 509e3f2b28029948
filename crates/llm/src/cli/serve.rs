//! `tempra serve`: the OpenAI-compatible HTTP server (see `tempra_llm::server`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tempra_llm::engine::Pooling;
use tempra_llm::server::{
    ApiKey, DEFAULT_BODY_TIMEOUT, DEFAULT_DRAIN_TIMEOUT, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PREFILL_GAP_PERCENT, DEFAULT_QUEUE, DEFAULT_SLOTS, LoadingServer, Server, ServerConfig,
};

use crate::cli::duration_arg::DurationArg;
use crate::cli::engine_args::EngineArgs;

/// The environment variable holding an API key.
const API_KEY_ENV: &str = "TEMPRA_API_KEY";

/// Arguments of `tempra serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Address to listen on (loopback by default: pass 0.0.0.0 to serve the network).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// KV slots: requests served at once, each with its own KV cache of --ctx positions.
    #[arg(long = "kv-slots", value_name = "N", default_value_t = DEFAULT_SLOTS)]
    kv_slots: usize,
    /// How /v1/embeddings pools a sequence's hidden states: mean, cls or last (default:
    /// the model's pooling_type, else mean).
    #[arg(long, value_name = "mean|cls|last", value_parser = parse_pooling)]
    pooling: Option<Pooling>,
    /// Requests that may wait for a slot; more are refused with HTTP 429.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_QUEUE)]
    queue: usize,
    /// A Jinja chat template file to use instead of the model's.
    #[arg(long = "chat-template-file", value_name = "FILE")]
    chat_template_file: Option<PathBuf>,
    /// Largest request body in bytes (larger ones get HTTP 413).
    #[arg(long = "max-body", value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body: usize,
    /// Require `Authorization: Bearer KEY` on every endpoint but /health (repeatable;
    /// also read from TEMPRA_API_KEY).
    #[arg(long = "api-key", value_name = "KEY")]
    api_keys: Vec<String>,
    /// Read API keys from FILE, one per line (blank lines and lines starting with # are
    /// skipped).
    #[arg(long = "api-key-file", value_name = "FILE")]
    api_key_file: Option<PathBuf>,
    /// The most generation requests one API key may have running or queued at once
    /// (more get HTTP 429).
    #[arg(long = "api-key-concurrency", value_name = "N")]
    api_key_concurrency: Option<usize>,
    /// Let web pages from ORIGIN (`https://app.example.com`) call the server, with CORS
    /// (repeatable; `*` for any). Requests carrying another Origin get HTTP 403.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// Answer requests for host NAME besides IP addresses and localhost (repeatable;
    /// `*.example.com` for subdomains, `*` for any). Others get HTTP 403 (DNS rebinding).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Accept chat messages with role NAME besides system, user, assistant, tool and
    /// developer (repeatable).
    #[arg(long = "allow-role", value_name = "NAME")]
    allow_roles: Vec<String>,
    /// Close a connection whose request head takes longer than this (seconds, or with
    /// ms/s/m).
    #[arg(long = "header-timeout", value_name = "SECS", default_value_t = DurationArg(DEFAULT_HEADER_TIMEOUT))]
    header_timeout: DurationArg,
    /// Answer HTTP 408 and close when a request body takes longer than this after its
    /// head.
    #[arg(long = "body-timeout", value_name = "SECS", default_value_t = DurationArg(DEFAULT_BODY_TIMEOUT))]
    body_timeout: DurationArg,
    /// Close a kept-alive connection idle for this long.
    #[arg(long = "idle-timeout", value_name = "SECS", default_value_t = DurationArg(DEFAULT_IDLE_TIMEOUT))]
    idle_timeout: DurationArg,
    /// The most connections open at once; at the cap the longest-waiting connection
    /// without a request in progress is closed to admit a new one.
    #[arg(long = "max-connections", value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// On SIGINT/SIGTERM, how long running requests may take to finish before every
    /// connection is closed (a second signal stops at once).
    #[arg(long = "drain-timeout", value_name = "SECS", default_value_t = DurationArg(DEFAULT_DRAIN_TIMEOUT))]
    drain_timeout: DurationArg,
    /// While a stream decodes, size each step that also carries prompt tokens to take
    /// about this many decode-only steps (1.1 to 100; larger: longer gaps between the
    /// streams' tokens, a long prompt's first token sooner).
    #[arg(long = "prefill-gap", value_name = "FACTOR", default_value_t = f64::from(DEFAULT_PREFILL_GAP_PERCENT) / 100.0)]
    prefill_gap: f64,
}

/// Runs `tempra serve` until Ctrl-C or SIGTERM.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.kv_slots == 0 {
        bail!("--kv-slots must be at least 1");
    }
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    if !(1.1..=100.0).contains(&args.prefill_gap) {
        bail!(
            "--prefill-gap must be 1.1 to 100 decode steps, not {}",
            args.prefill_gap
        );
    }
    if args.api_key_concurrency == Some(0) {
        bail!("--api-key-concurrency must be at least 1");
    }
    let api_keys = api_keys(&args)?;
    if args.api_key_concurrency.is_some() && api_keys.is_empty() {
        bail!(
            "--api-key-concurrency limits requests per API key: give keys with --api-key, --api-key-file or {API_KEY_ENV}"
        );
    }
    let chat_template = args
        .chat_template_file
        .as_ref()
        .map(|path| std::fs::read_to_string(path).with_context(|| path.display().to_string()))
        .transpose()?;
    let model_id = args
        .engine
        .model
        .model
        .file_stem()
        .map_or_else(|| "model".to_owned(), |s| s.to_string_lossy().into_owned());
    let address = if args.host.contains(':') && !args.host.starts_with('[') {
        format!("[{}]:{}", args.host, args.port)
    } else {
        format!("{}:{}", args.host, args.port)
    };
    let listener =
        TcpListener::bind(&address).with_context(|| format!("listening on {address}"))?;
    // The socket is bound before the model loads: until it is ready every request gets
    // 503 (`/health` says `loading`), so a load balancer can tell a loading replica
    // from a dead one.
    // A signal during the load ends the process at once, with status 0: nothing has
    // been served that a drain would finish.
    let loading = LoadingServer::start_handling_signals(listener, || {
        eprintln!("tempra serve: stopped while loading the model");
        std::process::exit(0);
    })
    .with_context(|| address.clone())?;
    let model = args.engine.load_for(args.kv_slots)?;
    let listener = loading.into_listener().with_context(|| address.clone())?;
    let open_to_network = listener
        .local_addr()
        .map(|a| !a.ip().is_loopback())
        .unwrap_or(true);
    let key_count = api_keys.len();
    let config = ServerConfig {
        model_id,
        slots: args.kv_slots,
        queue: args.queue,
        max_body_bytes: args.max_body,
        chat_template,
        handle_signals: true,
        header_timeout: args.header_timeout.0,
        body_timeout: args.body_timeout.0,
        idle_timeout: args.idle_timeout.0,
        max_connections: args.max_connections,
        drain_timeout: args.drain_timeout.0,
        prefill_gap_percent: (args.prefill_gap * 100.0).round() as u32,
        api_keys,
        api_key_concurrency: args.api_key_concurrency,
        cors_origins: args.cors_origins.clone(),
        allowed_hosts: args.allowed_hosts.clone(),
        extra_roles: args.allow_roles.clone(),
        pooling: args.pooling,
        ..ServerConfig::new("")
    };
    let server = Server::start(model, config, listener)
        .with_context(|| args.engine.model.model.display().to_string())?;
    if open_to_network && key_count == 0 {
        eprintln!(
            "warning: serving {} without an API key: anyone who can reach it can use the model (give --api-key, --api-key-file or {API_KEY_ENV})",
            server.local_addr()
        );
    }
    let auth = match key_count {
        0 => String::new(),
        1 => "; 1 API key".to_owned(),
        n => format!("; {n} API keys"),
    };
    eprintln!(
        "tempra serve: http://{} ({} slots, queue {}{auth}; Ctrl-C to stop)",
        server.local_addr(),
        args.kv_slots,
        args.queue
    );
    server.wait()?;
    Ok(())
}

/// The API keys from `--api-key`, `TEMPRA_API_KEY` and `--api-key-file`.
fn api_keys(args: &ServeArgs) -> anyhow::Result<Vec<ApiKey>> {
    let mut keys = Vec::new();
    for key in &args.api_keys {
        keys.push(ApiKey::new(key.as_str()).context("--api-key")?);
    }
    if let Ok(key) = std::env::var(API_KEY_ENV) {
        let key = key.trim();
        if !key.is_empty() {
            keys.push(ApiKey::new(key).context(API_KEY_ENV)?);
        }
    }
    if let Some(path) = &args.api_key_file {
        keys.extend(keys_from_file(path)?);
    }
    Ok(keys)
}

/// The keys of a key file: one per line, blank lines and `#` comments skipped.
fn keys_from_file(path: &Path) -> anyhow::Result<Vec<ApiKey>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        keys.push(ApiKey::new(line).with_context(|| format!("{} line {}", path.display(), i + 1))?);
    }
    if keys.is_empty() {
        bail!("{}: no API keys in the file", path.display());
    }
    Ok(keys)
}

/// `--pooling`: `mean`, `cls` or `last`.
fn parse_pooling(name: &str) -> Result<Pooling, String> {
    Pooling::parse(name).ok_or_else(|| format!("{name:?} is not a pooling (mean, cls or last)"))
}
