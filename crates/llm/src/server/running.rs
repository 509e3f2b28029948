//! `Server`: starts the engine thread and the HTTP runtime, and stops them.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::chat::ChatTemplate;
use crate::engine::Model;
use crate::error::{LlmError, Result};
use crate::server::ServerConfig;
use crate::server::admission::Admission;
use crate::server::memory_guard::check_slots_fit;
use crate::server::metrics::Metrics;
use crate::server::routes::router;
use crate::server::scheduler::Scheduler;
use crate::server::state::AppState;

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
    /// Errors: zero slots, the memory check ([`LlmError::SlotsOutOfMemory`], with the
    /// arithmetic), a chat template that does not compile, or I/O errors setting up
    /// the listener or the runtime.
    pub fn start(model: Arc<Model>, config: ServerConfig, listener: TcpListener) -> Result<Server> {
        if config.slots == 0 {
            return Err(LlmError::Argument {
                what: "the server needs at least one KV slot".into(),
            });
        }
        check_slots_fit(
            config.slots,
            model.context_length(),
            model.kv_cache_bytes() as u64,
            model.file().file_size(),
            model.arena_bytes() as u64,
            crate::engine::available_memory(),
        )?;
        let template = match &config.chat_template {
            Some(source) => {
                let vocab = model.vocab();
                let text = |id: Option<u32>| {
                    id.and_then(|id| vocab.token_str(id))
                        .unwrap_or_default()
                        .to_owned()
                };
                ChatTemplate::new(source, &text(vocab.bos()), &text(vocab.eos()))?
            }
            None => ChatTemplate::from_metadata(model.file().metadata(), model.vocab())?,
        };
        let sessions = (0..config.slots)
            .map(|_| model.session())
            .collect::<Result<Vec<_>>>()?;
        let io = |what: &str, source: std::io::Error| LlmError::Io {
            path: what.to_owned(),
            source,
        };
        let addr = listener
            .local_addr()
            .map_err(|e| io("listener address", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| io(&addr.to_string(), e))?;
        let admission = Arc::new(Admission::new(config.slots, config.queue));
        let metrics = Arc::new(Metrics::default());
        let state = Arc::new(AppState::new(
            Arc::clone(&model),
            config.model_id.clone(),
            template,
            Arc::clone(&admission),
            Arc::clone(&metrics),
            config.slots,
            config.max_body_bytes,
        ));
        let scheduler = Scheduler::new(sessions, Arc::clone(&admission), metrics);
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
        let http_admission = Arc::clone(&admission);
        let handle_signals = config.handle_signals;
        let http = std::thread::Builder::new()
            .name("tempra-http-main".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .map_err(|e| io(&addr.to_string(), e))?;
                    let shutdown = async move {
                        if handle_signals {
                            tokio::select! {
                                _ = stopped => {}
                                _ = termination() => {}
                            }
                        } else {
                            let _ = stopped.await;
                        }
                        // Ends the engine loop; its slots drop and open streams end.
                        http_admission.close();
                    };
                    axum::serve(listener, router(state))
                        .with_graceful_shutdown(shutdown)
                        .await
                        .map_err(|e| io(&addr.to_string(), e))
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

    /// Serves until SIGINT (Ctrl-C) or SIGTERM, then shuts down.
    pub fn wait(mut self) -> Result<()> {
        let result = self.join_http();
        self.join_engine();
        result
    }

    /// Stops accepting requests, ends the running ones and waits for the threads.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<()> {
        self.admission.close();
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

/// Resolves on SIGINT or (on Unix) SIGTERM.
async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
