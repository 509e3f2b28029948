//! `Server`: starts the engine thread and the HTTP runtime, and stops them.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::chat::{ChatTemplate, THINK_CLOSE, THINK_OPEN, ToolFormat, has_reasoning_tags};
use crate::engine::{Model, Pooling};
use crate::error::{LlmError, Result};
use crate::grammar::TokenTrie;
use crate::server::accept::{Serving, serve};
use crate::server::admission::Admission;
use crate::server::api_keys::{KeyCheck, KeyLimits};
use crate::server::browser::BrowserPolicy;
use crate::server::connections::{ConnectionLimits, Connections};
use crate::server::gate::Gate;
use crate::server::memory_guard::check_slots_fit;
use crate::server::metrics::Metrics;
use crate::server::readiness::{io_error, nonblocking};
use crate::server::routes::router;
use crate::server::scheduler::Scheduler;
use crate::server::slot_board::SlotBoard;
use crate::server::state::{AppState, unix_now};
use crate::server::termination;
use crate::server::{STANDARD_ROLES, ServerConfig};
use crate::tokenizer::{TokenId, Vocabulary};

/// A running server: an engine thread owning the slots and an HTTP runtime (tokio, its
/// own threads) answering requests. Dropping it shuts it down.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    admission: Arc<Admission>,
    stop: Option<oneshot::Sender<()>>,
    http: Option<JoinHandle<Result<()>>>,
    engine: Option<JoinHandle<()>>,
}

impl Server {
    /// Checks that `config.slots` KV caches fit in memory next to the weights, allocates
    /// them, and serves `model` on `listener` (bind it to port 0 for an ephemeral
    /// port).
    ///
    /// Errors: zero slots, connections or timeouts, a malformed CORS origin, allowed
    /// host or role, the memory check ([`LlmError::SlotsOutOfMemory`], with the
    /// arithmetic), a chat template that does not compile, or I/O errors setting up
    /// the listener or the runtime.
    pub fn start(model: Arc<Model>, config: ServerConfig, listener: TcpListener) -> Result<Server> {
        validate(&config)?;
        let policy = BrowserPolicy::new(&config.cors_origins, &config.allowed_hosts)?;
        check_slots_fit(
            config.slots,
            model.context_length(),
            model.kv_cache_bytes() as u64,
            model.file().file_size(),
            model.arena_bytes() as u64,
            crate::engine::available_memory(),
        )?;
        let template = match &config.chat_template {
            Some(source) => ChatTemplate::for_vocab(source, model.vocab())?,
            None => ChatTemplate::from_metadata(model.file().metadata(), model.vocab())?,
        };
        let tool_format = ToolFormat::detect(template.source());
        let reasoning = has_reasoning_tags(template.source());
        let trie = Arc::new(TokenTrie::new(
            model.vocab(),
            &preserved_tokens(model.vocab(), tool_format, reasoning),
        ));
        let sessions = (0..config.slots)
            .map(|_| model.session())
            .collect::<Result<Vec<_>>>()?;
        let io = io_error;
        let addr = nonblocking(&listener)?;
        let metrics = Arc::new(Metrics::default());
        let admission = Arc::new(Admission::new(
            config.slots,
            config.queue,
            Arc::clone(&metrics),
        ));
        let connections = Arc::new(Connections::new(ConnectionLimits {
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            max_connections: config.max_connections,
        }));
        let board = Arc::new(SlotBoard::new(config.slots));
        let state = Arc::new(AppState {
            model: Arc::clone(&model),
            model_id: config.model_id.clone(),
            template,
            tool_format,
            reasoning,
            trie,
            admission: Arc::clone(&admission),
            metrics: Arc::clone(&metrics),
            connections: Arc::clone(&connections),
            key_limits: Arc::new(KeyLimits::new(
                config.api_keys.len(),
                config.api_key_concurrency,
            )),
            roles: STANDARD_ROLES
                .iter()
                .map(|r| (*r).to_owned())
                .chain(config.extra_roles.iter().cloned())
                .collect(),
            slots: config.slots,
            board: Arc::clone(&board),
            pooling: config
                .pooling
                .or_else(|| model_pooling(&model))
                .unwrap_or(Pooling::Mean),
            max_body_bytes: config.max_body_bytes,
            created: unix_now(),
            next_id: AtomicU64::new(1),
        });
        let gate = Arc::new(Gate {
            router: router(state),
            policy,
            keys: KeyCheck::new(config.api_keys.clone()),
            max_body_bytes: config.max_body_bytes,
            body_timeout: config.body_timeout,
            metrics: Arc::clone(&metrics),
        });
        let gap = f64::from(config.prefill_gap_percent) / 100.0;
        let scheduler = Scheduler::new(sessions, Arc::clone(&admission), metrics, board, gap);
        let engine = std::thread::Builder::new()
            .name("tempra-engine".into())
            .spawn(move || scheduler.run())
            .map_err(|e| io("engine thread", e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.http_threads.max(1))
            .thread_name("tempra-http")
            .enable_all()
            .build()
            .map_err(|e| io("HTTP runtime", e))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = Serving {
            gate,
            connections,
            admission: Arc::clone(&admission),
            drain_timeout: config.drain_timeout,
        };
        let handle_signals = config.handle_signals;
        if handle_signals {
            // Counted from here on (and from the loading responder's start, if it
            // handled them): none is lost before the HTTP thread waits.
            termination::listen();
        }
        let http = std::thread::Builder::new()
            .name("tempra-http-main".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .map_err(|e| io(&addr.to_string(), e))?;
                    let stop = async move {
                        if handle_signals {
                            tokio::select! {
                                _ = stopped => {}
                                () = termination::signals(1) => {}
                            }
                        } else {
                            let _ = stopped.await;
                        }
                    };
                    // A second signal during the drain stops at once.
                    let cut_short = async move {
                        if handle_signals {
                            termination::signals(2).await;
                        } else {
                            std::future::pending::<()>().await;
                        }
                    };
                    serve(listener, serving, stop, cut_short).await;
                    Ok(())
                })
            })
            .map_err(|e| io("HTTP thread", e))?;
        Ok(Server {
            addr,
            admission,
            stop: Some(stop),
            http: Some(http),
            engine: Some(engine),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until SIGINT (Ctrl-C) or SIGTERM, then shuts down as
    /// [`Server::shutdown`] does (a second signal skips the drain).
    pub fn wait(mut self) -> Result<()> {
        let result = self.join_http();
        self.join_engine();
        result
    }

    /// Refuses new generation requests (503), closes the idle kept-alive connections,
    /// lets running requests (and those whose head is still arriving) finish for up to the drain timeout (new
    /// connections meanwhile get one 503 each, `/health` `draining`), then closes the
    /// listener and every connection and waits for the threads.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = self.join_http();
        self.join_engine();
        result
    }

    fn join_http(&mut self) -> Result<()> {
        match self.http.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(LlmError::Argument {
                what: "the HTTP thread panicked".into(),
            }),
            None => Ok(()),
        }
    }

    fn join_engine(&mut self) {
        self.admission.close();
        if let Some(engine) = self.engine.take() {
            let _ = engine.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.http.is_some() || self.engine.is_some() {
            let _ = self.stop_now();
        }
    }
}

/// Checks the settings [`Server::start`] cannot work without.
fn validate(config: &ServerConfig) -> Result<()> {
    let fail = |what: String| Err(LlmError::Argument { what });
    if config.slots == 0 {
        return fail("the server needs at least one KV slot".into());
    }
    if config.max_connections == 0 {
        return fail("the server needs to allow at least one connection".into());
    }
    let timeouts = [
        ("header", config.header_timeout),
        ("body", config.body_timeout),
        ("idle", config.idle_timeout),
    ];
    if let Some((name, _)) = timeouts.iter().find(|(_, t)| t.is_zero()) {
        return fail(format!("the {name} timeout must be longer than zero"));
    }
    if config.api_key_concurrency == Some(0) {
        return fail("the per-key concurrency limit must be at least 1".into());
    }
    if config.prefill_gap_percent < 110 {
        return fail(format!(
            "the prefill gap must be at least 110 % of a decode step, not {} %",
            config.prefill_gap_percent
        ));
    }
    for role in &config.extra_roles {
        let valid = !role.is_empty()
            && role
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return fail(format!(
                "the role `{role}` must be letters, digits, `_` or `-`"
            ));
        }
    }
    Ok(())
}

/// The pooling a model's `{arch}.pooling_type` names, if it names one.
fn model_pooling(model: &Model) -> Option<Pooling> {
    let key = format!("{}.pooling_type", model.config().arch.name());
    let value = model.file().metadata().get_u32(&key).ok()?;
    Pooling::from_gguf(u64::from(value))
}

/// The control tokens whose text the output must show: the tool-call markers of the
/// template's format and the reasoning tags (so that the reply parser and the grammars
/// see them).
fn preserved_tokens(
    vocab: &Vocabulary,
    format: Option<ToolFormat>,
    reasoning: bool,
) -> Vec<TokenId> {
    let think = [THINK_OPEN, THINK_CLOSE];
    format
        .map_or(&[][..], ToolFormat::markers)
        .iter()
        .chain(if reasoning { &think[..] } else { &[] })
        .filter_map(|text| vocab.token_id(text.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_the_server_cannot_work_with_are_refused_by_name() {
        let ok = ServerConfig::new("m");
        assert!(validate(&ok).is_ok());
        let refused = [
            (
                ServerConfig {
                    slots: 0,
                    ..ok.clone()
                },
                "KV slot",
            ),
            (
                ServerConfig {
                    prefill_gap_percent: 100,
                    ..ok.clone()
                },
                "prefill gap must be at least 110 %",
            ),
            (
                ServerConfig {
                    api_key_concurrency: Some(0),
                    ..ok.clone()
                },
                "per-key concurrency",
            ),
        ];
        for (config, what) in refused {
            let err = validate(&config).expect_err(what).to_string();
            assert!(err.contains(what), "{err}");
        }
    }
}
