//! The accept loop: HTTP/1.1 connections served by hyper, one task each, registered in
//! [`Connections`], and the graceful shutdown.
//!
//! - Each accepted socket is registered and served by hyper's HTTP/1 connection (keep
//!   alive on) through a [`TrackedIo`] and a [`ConnectionService`]; a sweeper task
//!   applies the header and idle timeouts.
//! - At the connection cap, or when `accept` fails for lack of file descriptors, the
//!   connection that has waited longest without a request in progress is closed first.
//!   When every connection has a request in progress, the new one is answered 503
//!   (`Retry-After`) and closed.
//! - Shutdown: refuse new generation requests (503), close the idle kept-alive
//!   connections, let the others finish their request (streams included; a request
//!   whose head is still arriving is read and answered, with 503 if it is new work) for
//!   up to the drain timeout (a second SIGINT/SIGTERM ends the wait), then close the
//!   listening socket, end the engine loop and close every socket. During the drain
//!   the listener stays open and answers each new connection once with 503 (`/health`
//!   `draining`, anything else `Retry-After`), then closes it (see
//!   [`readiness`](crate::server::readiness)).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::server::admission::Admission;
use crate::server::connections::{Connections, Registration};
use crate::server::errors::RETRY_AFTER_SECS;
use crate::server::gate::{ConnectionService, Gate};
use crate::server::readiness::{Unready, answer_until, next_connection, settle};
use crate::server::tracked_io::TrackedIo;

/// The most refusals (503 answers to connections over the cap) written at once; beyond
/// that a new connection over the cap is closed without an answer.
const MAX_REFUSING: usize = 64;
/// How long a refusal may take (writing the answer, waiting for the client to close).
const REFUSAL_TIME: Duration = Duration::from_secs(2);
/// How long the last step of a shutdown waits for connection tasks to end.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What the accept loop serves with.
#[derive(Debug)]
pub(crate) struct Serving {
    /// The checks and the router.
    pub(crate) gate: Arc<Gate>,
    /// The open connections.
    pub(crate) connections: Arc<Connections>,
    /// The job queue (refused, then closed, at shutdown).
    pub(crate) admission: Arc<Admission>,
    /// How long running requests may take to finish at shutdown.
    pub(crate) drain_timeout: Duration,
}

/// Serves `listener` until `stop` resolves, then shuts down gracefully; `cut_short`
/// resolving during the drain ends it early.
pub(crate) async fn serve(
    listener: TcpListener,
    serving: Serving,
    stop: impl Future<Output = ()>,
    cut_short: impl Future<Output = ()>,
) {
    let Serving {
        gate,
        connections,
        admission,
        drain_timeout,
    } = serving;
    let sweeper = tokio::spawn(sweep(Arc::clone(&connections)));
    let refusing = Arc::new(AtomicUsize::new(0));
    tokio::pin!(stop);
    while let Some(accepted) = next_connection(&listener, stop.as_mut()).await {
        match accepted {
            Ok(stream) => admit(stream, &gate, &connections, &refusing),
            Err(e) if out_of_descriptors(&e) => {
                // Make room: the evicted connection's task closes its socket.
                if !connections.evict_and_wait(Duration::from_millis(100)).await {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            // A connection reset before it was accepted, and the like.
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    admission.refuse_new();
    connections.drain();
    // The listener stays open during the drain: each new connection gets one 503 (a
    // load balancer's health check sees `draining`, a request `Retry-After`) and is
    // closed; it is not registered, so it does not hold the drain up.
    let answering = Arc::new(AtomicUsize::new(0));
    let drained = async {
        tokio::select! {
            _ = tokio::time::timeout(drain_timeout, connections.all_gone()) => {}
            () = cut_short => {}
        }
    };
    let draining = Unready::Draining(Arc::clone(&admission));
    answer_until(&listener, draining, drained, &answering).await;
    // From here on new connections are refused.
    drop(listener);
    // Ends the engine loop; its slots drop and open streams end.
    admission.close();
    connections.close_all();
    let _ = tokio::time::timeout(CLOSE_WAIT, connections.all_gone()).await;
    settle(&answering).await;
    sweeper.abort();
}

/// Registers and serves a new connection, making room or refusing it at the cap.
fn admit(
    stream: TcpStream,
    gate: &Arc<Gate>,
    connections: &Arc<Connections>,
    refusing: &Arc<AtomicUsize>,
) {
    // Small writes (SSE chunks) go out at once.
    let _ = stream.set_nodelay(true);
    let max = connections.limits().max_connections;
    if connections.count() >= max && !connections.evict_one() {
        connections.stats.refused.fetch_add(1, Ordering::Relaxed);
        if refusing.fetch_add(1, Ordering::AcqRel) < MAX_REFUSING {
            let refusing = Arc::clone(refusing);
            tokio::spawn(async move {
                refuse(stream).await;
                refusing.fetch_sub(1, Ordering::AcqRel);
            });
        } else {
            refusing.fetch_sub(1, Ordering::AcqRel);
        }
        return;
    }
    let registration = connections.register();
    tokio::spawn(serve_connection(stream, registration, Arc::clone(gate)));
}

/// Serves one connection until it ends or its tracker says to close it.
async fn serve_connection(stream: TcpStream, registration: Registration, gate: Arc<Gate>) {
    let tracker = Arc::clone(&registration.tracker);
    {
        let io = TokioIo::new(TrackedIo::new(stream, Arc::clone(&tracker)));
        let service = ConnectionService::new(gate, Arc::clone(&tracker));
        let connection = http1::Builder::new()
            .keep_alive(true)
            .serve_connection(io, service);
        tokio::pin!(connection);
        let mut draining = false;
        loop {
            if tracker.is_closing() {
                break;
            }
            if tracker.is_draining() && !draining && tracker.may_shut_down() {
                connection.as_mut().graceful_shutdown();
                draining = true;
            }
            tokio::select! {
                _ = connection.as_mut() => break,
                () = tracker.signalled() => {}
            }
        }
        // The connection and its socket are dropped here...
    }
    // ...before the connection leaves the registry.
    drop(registration);
}

/// Answers a connection over the cap with 503 and closes it.
async fn refuse(mut stream: TcpStream) {
    const BODY: &str = "{\"error\":{\"message\":\"the server has too many connections with requests in progress; retry later\",\"type\":\"server_error\",\"param\":null,\"code\":\"too_many_connections\"}}";
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: {RETRY_AFTER_SECS}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read until the client closes, so that closing does not reset the connection
        // before the client has read the answer.
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
}

/// Applies the header and idle timeouts.
async fn sweep(connections: Arc<Connections>) {
    let mut tick = tokio::time::interval(connections.sweep_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        connections.sweep(Instant::now());
    }
}

/// Whether `accept` failed because the process or the system is out of file
/// descriptors (EMFILE, ENFILE).
fn out_of_descriptors(e: &io::Error) -> bool {
    // EMFILE is 24 and ENFILE 23 on Linux, macOS and the BSDs.
    cfg!(unix) && matches!(e.raw_os_error(), Some(23 | 24))
}
