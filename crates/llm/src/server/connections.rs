//! `Connections`: the registry of open HTTP connections, what each is doing, and the
//! rules that close them.
//!
//! A connection is in one of three phases: reading a request head (from its first byte,
//! or from accept for a new connection), busy (from a complete head until its response
//! ends: reading the body, waiting in the queue, generating, streaming), or idle
//! (kept alive between requests). A sweeper closes a connection whose head takes longer
//! than the header timeout or that idles longer than the idle timeout; at the
//! connection cap (or when the process runs out of file descriptors) the connection
//! that has waited longest without a request in progress is closed to make room. Busy
//! connections are never evicted; the body timeout (in the request body) bounds the one
//! phase of a busy connection that the client controls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Why the server closed a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// Its request head did not arrive in time.
    HeaderTimeout,
    /// It idled too long between requests.
    IdleTimeout,
    /// It made room for a new connection.
    Evicted,
}

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a request head since then.
    Head(Instant),
    /// Running this many requests.
    Busy(usize),
    /// Kept alive with nothing to do since then.
    Idle(Instant),
}

/// One connection's shared state: its phase and the signals to its task.
#[derive(Debug)]
pub(crate) struct Tracker {
    phase: Mutex<Phase>,
    closing: AtomicBool,
    draining: AtomicBool,
    /// Whether any byte has arrived on the connection.
    read_any: AtomicBool,
    signal: Notify,
}

impl Tracker {
    fn phase(&self) -> MutexGuard<'_, Phase> {
        // Each critical section is one assignment: a poisoned lock is still consistent.
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes arrived: an idle connection starts reading a request head. The first bytes
    /// of a draining connection wake its task (see [`Tracker::may_shut_down`]).
    pub(crate) fn on_read(&self) {
        {
            let mut phase = self.phase();
            if let Phase::Idle(_) = *phase {
                *phase = Phase::Head(Instant::now());
            }
        }
        if !self.read_any.swap(true, Ordering::AcqRel) && self.is_draining() {
            self.signal.notify_one();
        }
    }

    /// Whether the connection's task may ask hyper for a graceful shutdown now: once
    /// any byte has arrived. Hyper closes a connection that has seen no data at once,
    /// which would drop a request already sent but not yet read; until its first byte
    /// the header timeout (and the drain's end) bound such a connection instead.
    pub(crate) fn may_shut_down(&self) -> bool {
        self.read_any.load(Ordering::Acquire)
    }

    /// A request head is complete: busy until the returned guard drops (when the
    /// response has been sent or abandoned).
    pub(crate) fn begin_request(self: &Arc<Self>) -> RequestGuard {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        RequestGuard {
            tracker: Arc::clone(self),
        }
    }

    fn end_request(&self) {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        };
    }

    /// Asks the connection's task to drop the connection now.
    fn close(&self) -> bool {
        let first = !self.closing.swap(true, Ordering::AcqRel);
        self.signal.notify_one();
        first
    }

    /// Asks the connection's task to finish its request in progress and close.
    fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.signal.notify_one();
    }

    /// Whether the connection must be dropped now.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Whether the connection must close after its request in progress.
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Resolves when [`Tracker::is_closing`] or [`Tracker::is_draining`] may have
    /// changed.
    pub(crate) async fn signalled(&self) {
        self.signal.notified().await;
    }

    fn is_busy(&self) -> bool {
        matches!(*self.phase(), Phase::Busy(_))
    }

    fn is_idle(&self) -> bool {
        matches!(*self.phase(), Phase::Idle(_))
    }
}

/// A request in progress on a connection; dropping it ends the request.
#[derive(Debug)]
pub(crate) struct RequestGuard {
    tracker: Arc<Tracker>,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.tracker.end_request();
    }
}

/// The limits [`Connections`] enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    /// The most time a request head may take.
    pub(crate) header_timeout: Duration,
    /// The most time a connection may idle between requests.
    pub(crate) idle_timeout: Duration,
    /// The most connections open at once.
    pub(crate) max_connections: usize,
}

/// Counts of connections closed by the server, by reason.
#[derive(Debug, Default)]
pub(crate) struct ConnectionStats {
    /// Closed for a slow request head.
    pub(crate) header_timeouts: AtomicU64,
    /// Closed for idling.
    pub(crate) idle_timeouts: AtomicU64,
    /// Closed to make room for a new connection.
    pub(crate) evictions: AtomicU64,
    /// New connections answered 503 and closed (every connection busy).
    pub(crate) refused: AtomicU64,
    /// Connections accepted.
    pub(crate) accepted: AtomicU64,
}

#[derive(Debug, Default)]
struct Open {
    trackers: HashMap<u64, Arc<Tracker>>,
    next_id: u64,
}

/// The open connections.
#[derive(Debug)]
pub(crate) struct Connections {
    open: Mutex<Open>,
    /// Notified whenever a connection leaves.
    left: Notify,
    limits: ConnectionLimits,
    /// Counts.
    pub(crate) stats: ConnectionStats,
}

/// A connection's place in the registry; dropping it removes the connection.
#[derive(Debug)]
pub(crate) struct Registration {
    connections: Arc<Connections>,
    id: u64,
    /// The connection's state.
    pub(crate) tracker: Arc<Tracker>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.connections.lock().trackers.remove(&self.id);
        self.connections.left.notify_waiters();
    }
}

impl Connections {
    /// An empty registry enforcing `limits`.
    pub(crate) fn new(limits: ConnectionLimits) -> Connections {
        Connections {
            open: Mutex::new(Open::default()),
            left: Notify::new(),
            limits,
            stats: ConnectionStats::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // Each critical section is one insert, remove or scan: still consistent.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limits.
    pub(crate) fn limits(&self) -> ConnectionLimits {
        self.limits
    }

    /// Registers a new connection, waiting for its request head from now.
    pub(crate) fn register(self: &Arc<Self>) -> Registration {
        let tracker = Arc::new(Tracker {
            phase: Mutex::new(Phase::Head(Instant::now())),
            closing: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            read_any: AtomicBool::new(false),
            signal: Notify::new(),
        });
        let mut open = self.lock();
        let id = open.next_id;
        open.next_id += 1;
        open.trackers.insert(id, Arc::clone(&tracker));
        drop(open);
        self.stats.accepted.fetch_add(1, Ordering::Relaxed);
        Registration {
            connections: Arc::clone(self),
            id,
            tracker,
        }
    }

    /// Connections open and not being closed.
    pub(crate) fn count(&self) -> usize {
        self.lock()
            .trackers
            .values()
            .filter(|t| !t.is_closing())
            .count()
    }

    /// Connections with a request in progress.
    pub(crate) fn busy_count(&self) -> usize {
        self.lock()
            .trackers
            .values()
            .filter(|t| t.is_busy())
            .count()
    }

    /// Whether no connection is registered (closing ones included).
    fn is_empty(&self) -> bool {
        self.lock().trackers.is_empty()
    }

    /// Closes the connection that has waited longest without a request in progress
    /// (idle, or reading a head); returns whether there was one.
    pub(crate) fn evict_one(&self) -> bool {
        let open = self.lock();
        let oldest = open
            .trackers
            .values()
            .filter(|t| !t.is_closing())
            .filter_map(|t| match *t.phase() {
                Phase::Head(since) | Phase::Idle(since) => Some((since, t)),
                Phase::Busy(_) => None,
            })
            .min_by_key(|(since, _)| *since)
            .map(|(_, t)| Arc::clone(t));
        drop(open);
        match oldest {
            Some(t) => {
                if t.close() {
                    self.stats.evictions.fetch_add(1, Ordering::Relaxed);
                }
                true
            }
            None => false,
        }
    }

    /// [`Connections::evict_one`], then waits (up to `timeout`) until a connection has
    /// left the registry, its socket closed; returns whether one was evicted.
    pub(crate) async fn evict_and_wait(&self, timeout: Duration) -> bool {
        let left = self.left.notified();
        tokio::pin!(left);
        left.as_mut().enable();
        if !self.evict_one() {
            return false;
        }
        let _ = tokio::time::timeout(timeout, left).await;
        true
    }

    /// Closes the connections past their header or idle deadline at `now`.
    pub(crate) fn sweep(&self, now: Instant) {
        let open = self.lock();
        for t in open.trackers.values() {
            let reason = match *t.phase() {
                Phase::Head(since) if now >= since + self.limits.header_timeout => {
                    &self.stats.header_timeouts
                }
                Phase::Idle(since) if now >= since + self.limits.idle_timeout => {
                    &self.stats.idle_timeouts
                }
                _ => continue,
            };
            if t.close() {
                reason.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// How often [`Connections::sweep`] should run: a tenth of the shorter timeout,
    /// between 5 ms and 250 ms.
    pub(crate) fn sweep_interval(&self) -> Duration {
        (self.limits.header_timeout.min(self.limits.idle_timeout) / 10)
            .clamp(Duration::from_millis(5), Duration::from_millis(250))
    }

    /// Shutting down: idle keep-alive connections close now; the others (a request in
    /// progress, or its head on the way, as on a connection just accepted) finish that
    /// request and close. Closing one whose request is on the way would drop the
    /// request unanswered; the header timeout still bounds how long its head may take.
    pub(crate) fn drain(&self) {
        for t in self.lock().trackers.values() {
            if t.is_idle() {
                t.close();
            } else {
                t.drain();
            }
        }
    }

    /// Closes every connection now.
    pub(crate) fn close_all(&self) {
        for t in self.lock().trackers.values() {
            t.close();
        }
    }

    /// Resolves once no connection is registered.
    pub(crate) async fn all_gone(&self) {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if self.is_empty() {
                return;
            }
            left.await;
        }
    }

    /// How many connections the server closed for `reason`.
    pub(crate) fn closed_by(&self, reason: CloseReason) -> u64 {
        let counter = match reason {
            CloseReason::HeaderTimeout => &self.stats.header_timeouts,
            CloseReason::IdleTimeout => &self.stats.idle_timeouts,
            CloseReason::Evicted => &self.stats.evictions,
        };
        counter.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(max: usize) -> Arc<Connections> {
        Arc::new(Connections::new(ConnectionLimits {
            header_timeout: Duration::from_millis(100),
            idle_timeout: Duration::from_millis(300),
            max_connections: max,
        }))
    }

    #[test]
    fn phases_follow_reads_and_requests() {
        let c = registry(4);
        let r = c.register();
        assert!(matches!(*r.tracker.phase(), Phase::Head(_)));
        let guard = r.tracker.begin_request();
        assert!(r.tracker.is_busy());
        r.tracker.on_read(); // body bytes keep it busy
        assert!(r.tracker.is_busy());
        drop(guard);
        assert!(matches!(*r.tracker.phase(), Phase::Idle(_)));
        r.tracker.on_read();
        assert!(matches!(*r.tracker.phase(), Phase::Head(_)));
        assert_eq!(c.count(), 1);
        drop(r);
        assert_eq!(c.count(), 0);
    }

    #[test]
    fn sweep_closes_slow_heads_and_long_idlers_only() {
        let c = registry(8);
        let head = c.register();
        let idle = c.register();
        drop(idle.tracker.begin_request()); // idle from now
        let busy = c.register();
        let _guard = busy.tracker.begin_request();
        let now = Instant::now();
        c.sweep(now);
        assert!(!head.tracker.is_closing() && !idle.tracker.is_closing());
        c.sweep(now + Duration::from_millis(150));
        assert!(head.tracker.is_closing());
        assert!(!idle.tracker.is_closing());
        c.sweep(now + Duration::from_millis(400));
        assert!(idle.tracker.is_closing());
        assert!(!busy.tracker.is_closing());
        assert_eq!(c.closed_by(CloseReason::HeaderTimeout), 1);
        assert_eq!(c.closed_by(CloseReason::IdleTimeout), 1);
        assert_eq!(c.count(), 1);
    }

    #[test]
    fn eviction_takes_the_oldest_waiting_connection_never_a_busy_one() {
        let c = registry(3);
        let busy = c.register();
        let _guard = busy.tracker.begin_request();
        let older = c.register();
        std::thread::sleep(Duration::from_millis(2));
        let newer = c.register();
        assert!(c.evict_one());
        assert!(older.tracker.is_closing());
        assert!(!newer.tracker.is_closing());
        assert!(c.evict_one());
        assert!(newer.tracker.is_closing());
        assert!(!c.evict_one(), "only a busy connection is left");
        assert!(!busy.tracker.is_closing());
        assert_eq!(c.closed_by(CloseReason::Evicted), 2);
    }

    #[test]
    fn drain_closes_idle_connections_and_lets_the_others_finish_their_request() {
        let c = registry(3);
        let idle = c.register();
        drop(idle.tracker.begin_request());
        let busy = c.register();
        let _guard = busy.tracker.begin_request();
        // Just accepted: its first request is on the way.
        let reading = c.register();
        c.drain();
        assert!(idle.tracker.is_closing());
        for t in [&busy.tracker, &reading.tracker] {
            assert!(t.is_draining() && !t.is_closing());
        }
        // Hyper may be asked to shut the just-accepted one down once bytes arrived.
        assert!(!reading.tracker.may_shut_down());
        reading.tracker.on_read();
        assert!(reading.tracker.may_shut_down());
        c.close_all();
        assert!(busy.tracker.is_closing() && reading.tracker.is_closing());
    }
}
