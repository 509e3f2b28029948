//! `tempra serve`: the OpenAI-compatible HTTP server (see `tempra_llm::server`).

use std::net::TcpListener;
use std::path::PathBuf;

use anyhow::{Context, bail};
use tempra_llm::server::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_QUEUE, DEFAULT_SLOTS, Server, ServerConfig,
};

use crate::cli::engine_args::EngineArgs;

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
    /// Requests that may wait for a slot; more are refused with HTTP 429.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_QUEUE)]
    queue: usize,
    /// A Jinja chat template file to use instead of the model's.
    #[arg(long = "chat-template-file", value_name = "FILE")]
    chat_template_file: Option<PathBuf>,
    /// Largest request body in bytes (larger ones get HTTP 413).
    #[arg(long = "max-body", value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body: usize,
}

/// Runs `tempra serve` until Ctrl-C or SIGTERM.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.kv_slots == 0 {
        bail!("--kv-slots must be at least 1");
    }
    let chat_template = args
        .chat_template_file
        .as_ref()
        .map(|path| std::fs::read_to_string(path).with_context(|| path.display().to_string()))
        .transpose()?;
    let model = args.engine.load_for(args.kv_slots)?;
    let model_id = args
        .engine
        .model
        .model
        .file_stem()
        .map_or_else(|| "model".to_owned(), |s| s.to_string_lossy().into_owned());
    let address = format!("{}:{}", args.host, args.port);
    let listener =
        TcpListener::bind(&address).with_context(|| format!("listening on {address}"))?;
    let config = ServerConfig {
        model_id,
        slots: args.kv_slots,
        queue: args.queue,
        max_body_bytes: args.max_body,
        chat_template,
        handle_signals: true,
        ..ServerConfig::new("")
    };
    let server = Server::start(model, config, listener)
        .with_context(|| args.engine.model.model.display().to_string())?;
    eprintln!(
        "tempra serve: http://{} ({} slots, queue {}; Ctrl-C to stop)",
        server.local_addr(),
        args.kv_slots,
        args.queue
    );
    server.wait()?;
    Ok(())
}
