//! Readiness for load balancers: what `GET /health` and the other requests get while
//! the model loads, while the server runs, and while it drains.
//!
//! - Loading: a [`LoadingServer`] holds the listening socket while the model loads and
//!   answers every request with 503: `GET /health` with `{"status":"loading"}`, any
//!   other path with an OpenAI-style error (`code` `model_loading`) and `Retry-After`.
//!   [`LoadingServer::into_listener`] hands the socket back for [`Server::start`]
//!   without closing it: connections that arrive during the handover wait in its
//!   backlog and are served by the server.
//! - Ready: `GET /health` answers 200 with `status` `ok` and the slot counts
//!   (`slots_idle`, `slots_processing`, `queue_waiting`).
//! - Draining (after SIGINT/SIGTERM or [`Server::shutdown`], for up to the drain
//!   timeout): the listener stays open, and each new connection gets one answer and is
//!   closed: `GET /health` 503 with `status` `draining` and the slot counts, any other
//!   request 503 `the server is shutting down` with `Retry-After` (the body is read
//!   first, so that closing never resets the connection under the answer). Running and
//!   queued requests, streams included, finish on their own connections; idle
//!   kept-alive connections are closed. When they are done (or the drain timeout
//!   passes) the listener closes and new connections are refused. A load balancer thus
//!   gets a quick 503 or a refused connection, never a hang: it marks the replica down
//!   at its next health check and retries the refused requests on another replica.
//!
//! [`Server::start`]: crate::server::Server::start
//! [`Server::shutdown`]: crate::server::Server::shutdown

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::error::{LlmError, Result};
use crate::server::admission::Admission;
use crate::server::errors::ApiError;
use crate::server::termination;

/// How long answering one connection may take (its request head and body arriving,
/// the answer going out).
const ANSWER_TIME: Duration = Duration::from_secs(5);
/// The most connections answered at once; more are closed without an answer.
const MAX_ANSWERING: usize = 64;
/// The most request body bytes read (and dropped) before an answer.
const DISCARD_LIMIT: usize = 1 << 20;

/// Why the server cannot take requests now.
#[derive(Clone, Debug)]
pub(crate) enum Unready {
    /// The model is loading.
    Loading,
    /// The server is draining; the queue tells the slot counts.
    Draining(Arc<Admission>),
}

/// The `GET /health` answer of a running server: 200 `ok`, or 503 `draining` once it
/// refuses new requests, with the slot counts.
pub(crate) fn health_response(admission: &Admission) -> Response {
    let occupancy = admission.occupancy();
    let slots = admission.slots();
    let (status, word) = if admission.is_refusing() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    } else {
        (StatusCode::OK, "ok")
    };
    let body = serde_json::json!({
        "status": word,
        "slots_idle": slots - occupancy.busy.min(slots),
        "slots_processing": occupancy.busy,
        "queue_waiting": occupancy.waiting,
    });
    (status, Json(body)).into_response()
}

/// The answer to a request for `path` while `unready`.
fn unready_response(path: &str, unready: &Unready) -> Response {
    match (path, unready) {
        ("/health", Unready::Loading) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "loading"})),
        )
            .into_response(),
        ("/health", Unready::Draining(admission)) => health_response(admission),
        (_, Unready::Loading) => ApiError::loading().into_response(),
        (_, Unready::Draining(_)) => ApiError::shutting_down().into_response(),
    }
}

/// Counts a connection being answered while it lives.
struct Answering(Arc<AtomicUsize>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The next connection on `listener`, or `None` once `until` resolves (it wins a tie).
pub(crate) async fn next_connection<F: Future<Output = ()>>(
    listener: &TcpListener,
    until: Pin<&mut F>,
) -> Option<io::Result<TcpStream>> {
    tokio::select! {
        biased;
        () = until => None,
        accepted = listener.accept() => Some(accepted.map(|(stream, _)| stream)),
    }
}

/// Answers each connection on `listener` once as `unready` says, each in a task of its
/// own, until `until` resolves; `answering` counts the connections being answered (at
/// [`MAX_ANSWERING`] a new one is closed at once).
pub(crate) async fn answer_until(
    listener: &TcpListener,
    unready: Unready,
    until: impl Future<Output = ()>,
    answering: &Arc<AtomicUsize>,
) {
    tokio::pin!(until);
    while let Some(accepted) = next_connection(listener, until.as_mut()).await {
        match accepted {
            Ok(stream) => {
                let guard = Answering(Arc::clone(answering));
                if answering.fetch_add(1, Ordering::AcqRel) < MAX_ANSWERING {
                    tokio::spawn(answer(stream, unready.clone(), guard));
                }
            }
            // Out of descriptors, a connection reset before it was accepted, and the like.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Waits (at most [`ANSWER_TIME`]) for the connections being answered to close.
pub(crate) async fn settle(answering: &AtomicUsize) {
    let deadline = Instant::now() + ANSWER_TIME;
    while answering.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Answers one request on `stream` and closes it; `_guard` counts it meanwhile.
async fn answer(stream: TcpStream, unready: Unready, _guard: Answering) {
    // The answer goes out at once.
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |request: Request<Incoming>| {
        let unready = unready.clone();
        async move {
            let path = request.uri().path().to_owned();
            // Read the body first: closing a socket with unread bytes resets the
            // connection, and the client could lose the answer.
            let _ = axum::body::to_bytes(Body::new(request.into_body()), DISCARD_LIMIT).await;
            Ok::<_, Infallible>(unready_response(&path, &unready))
        }
    });
    let connection = http1::Builder::new()
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(ANSWER_TIME, connection).await;
}

/// An I/O error about `what`.
pub(crate) fn io_error(what: &str, source: io::Error) -> LlmError {
    LlmError::Io {
        path: what.to_owned(),
        source,
    }
}

/// Switches `listener` to non-blocking mode (as tokio needs) and returns its address.
pub(crate) fn nonblocking(listener: &std::net::TcpListener) -> Result<SocketAddr> {
    let addr = listener
        .local_addr()
        .map_err(|e| io_error("listener address", e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| io_error(&addr.to_string(), e))?;
    Ok(addr)
}

/// Holds a listening socket while the model loads, answering every request with 503
/// (`GET /health` with `{"status":"loading"}`, other requests with an OpenAI-style
/// error, code `model_loading`, and `Retry-After`), until
/// [`LoadingServer::into_listener`] hands the socket back for
/// [`Server::start`](crate::server::Server::start). It runs on a thread of its own;
/// dropping it stops it and closes the socket.
#[derive(Debug)]
pub struct LoadingServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    handed_back: std::sync::mpsc::Receiver<io::Result<std::net::TcpListener>>,
    thread: Option<JoinHandle<()>>,
}

impl LoadingServer {
    /// Starts answering on `listener` (bound and listening; port 0 for an ephemeral
    /// port).
    ///
    /// Errors: I/O errors setting up the listener, the runtime or the thread.
    pub fn start(listener: std::net::TcpListener) -> Result<LoadingServer> {
        LoadingServer::launch(listener, None)
    }

    /// [`LoadingServer::start`], and calls `on_termination` (on the responder's thread)
    /// when SIGINT (Ctrl-C) or SIGTERM arrives before
    /// [`LoadingServer::into_listener`]: `tempra serve` exits with status 0 there, since
    /// nothing has been served that a drain would finish. The responder keeps answering
    /// if `on_termination` returns; the signal stays counted, so a
    /// [`Server`](crate::server::Server) started later with `handle_signals` drains at
    /// once. From this call on the process no longer takes the signals' default action,
    /// and a signal that arrives after the socket is handed back is not lost: that
    /// server sees it.
    ///
    /// Errors: as [`LoadingServer::start`].
    pub fn start_handling_signals(
        listener: std::net::TcpListener,
        on_termination: impl FnOnce() + Send + 'static,
    ) -> Result<LoadingServer> {
        termination::listen();
        LoadingServer::launch(listener, Some(Box::new(on_termination)))
    }

    fn launch(
        listener: std::net::TcpListener,
        on_termination: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<LoadingServer> {
        let io = io_error;
        let addr = nonblocking(&listener)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| io("HTTP runtime", e))?;
        let listener = {
            let _context = runtime.enter();
            TcpListener::from_std(listener).map_err(|e| io(&addr.to_string(), e))?
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let (give, handed_back) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("tempra-loading".into())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Some(on_termination) = on_termination {
                        // Dropped with the runtime once the socket is handed back.
                        tokio::spawn(async move {
                            termination::signals(1).await;
                            on_termination();
                        });
                    }
                    let answering = Arc::new(AtomicUsize::new(0));
                    let stopped = async move {
                        let _ = stopped.await;
                    };
                    answer_until(&listener, Unready::Loading, stopped, &answering).await;
                    let _ = give.send(listener.into_std());
                    // The connections being answered get their answer.
                    settle(&answering).await;
                });
            })
            .map_err(|e| io("loading thread", e))?;
        Ok(LoadingServer {
            addr,
            stop: Some(stop),
            handed_back,
            thread: Some(thread),
        })
    }

    /// The address it answers on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops answering and returns the listening socket, still bound and listening (in
    /// non-blocking mode), for [`Server::start`](crate::server::Server::start). The
    /// connections being answered get their answer on the background thread, which
    /// ends within a few seconds.
    ///
    /// Errors: the socket could not be taken back from the runtime, or the thread
    /// ended without handing it back.
    pub fn into_listener(mut self) -> Result<std::net::TcpListener> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The thread ends on its own once its answers are out.
        drop(self.thread.take());
        match self.handed_back.recv() {
            Ok(Ok(listener)) => Ok(listener),
            Ok(Err(source)) => Err(LlmError::Io {
                path: self.addr.to_string(),
                source,
            }),
            Err(_) => Err(LlmError::Argument {
                what: "the loading responder's thread ended without the listener".into(),
            }),
        }
    }
}

impl Drop for LoadingServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
