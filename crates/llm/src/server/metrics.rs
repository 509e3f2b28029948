//! `Metrics`: the server's counters, rendered as Prometheus text on `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tempra_pool::PoolStats;

use crate::server::admission::Occupancy;
use crate::server::connections::{CloseReason, Connections};

/// Counters updated by the handlers and the engine thread (relaxed atomics: each is
/// independent).
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// `POST /v1/completions` requests.
    pub(crate) completion_requests: AtomicU64,
    /// `POST /v1/chat/completions` requests.
    pub(crate) chat_requests: AtomicU64,
    /// `POST /v1/embeddings` requests.
    pub(crate) embedding_requests: AtomicU64,
    /// Requests answered 429 (slots and queue full).
    pub(crate) rejected_requests: AtomicU64,
    /// Requests answered with another 4xx.
    pub(crate) invalid_requests: AtomicU64,
    /// Requests answered 401 (no or wrong API key).
    pub(crate) unauthorized_requests: AtomicU64,
    /// Requests answered 403 (a foreign `Origin` or `Host`).
    pub(crate) forbidden_requests: AtomicU64,
    /// Requests whose body did not arrive within the body timeout (408).
    pub(crate) body_timeouts: AtomicU64,
    /// Jobs the engine failed.
    pub(crate) failed_requests: AtomicU64,
    /// Jobs whose client went away before the end.
    pub(crate) cancelled_requests: AtomicU64,
    /// Prompt tokens of admitted jobs.
    pub(crate) prompt_tokens: AtomicU64,
    /// Prompt tokens reused from a slot's cache (not recomputed).
    pub(crate) cached_prompt_tokens: AtomicU64,
    /// Generated tokens.
    pub(crate) completion_tokens: AtomicU64,
    /// Batched decode steps.
    pub(crate) decode_steps: AtomicU64,
    /// Tokens run through batched decode steps.
    pub(crate) decode_tokens: AtomicU64,
    /// Nanoseconds spent in batched decode steps.
    pub(crate) decode_nanos: AtomicU64,
    /// Nanoseconds spent in prefills.
    pub(crate) prefill_nanos: AtomicU64,
}

/// Adds `d` to a nanosecond counter.
pub(crate) fn add_duration(counter: &AtomicU64, d: Duration) {
    counter.fetch_add(
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

impl Metrics {
    /// The Prometheus text exposition of the counters, the slot occupancy, the HTTP
    /// connections and the transient pool's statistics.
    pub(crate) fn render(
        &self,
        slots: usize,
        occupancy: Occupancy,
        connections: &Connections,
        pool: &PoolStats,
    ) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::with_capacity(4096);
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        metric(
            "tempra_requests_total",
            "counter",
            "Generation and embedding requests received, by endpoint.",
            &[
                (
                    "{endpoint=\"completions\"}",
                    get(&self.completion_requests) as f64,
                ),
                (
                    "{endpoint=\"chat_completions\"}",
                    get(&self.chat_requests) as f64,
                ),
                (
                    "{endpoint=\"embeddings\"}",
                    get(&self.embedding_requests) as f64,
                ),
            ],
        );
        metric(
            "tempra_requests_rejected_total",
            "counter",
            "Requests answered 429 because every slot and the queue were full.",
            &[("", get(&self.rejected_requests) as f64)],
        );
        metric(
            "tempra_requests_invalid_total",
            "counter",
            "Requests answered with a 4xx error other than 429.",
            &[("", get(&self.invalid_requests) as f64)],
        );
        metric(
            "tempra_requests_unauthorized_total",
            "counter",
            "Requests answered 401: no API key or a wrong one.",
            &[("", get(&self.unauthorized_requests) as f64)],
        );
        metric(
            "tempra_requests_forbidden_total",
            "counter",
            "Requests answered 403: an Origin or Host the server does not answer.",
            &[("", get(&self.forbidden_requests) as f64)],
        );
        metric(
            "tempra_request_body_timeouts_total",
            "counter",
            "Requests answered 408 because their body did not arrive within the body timeout.",
            &[("", get(&self.body_timeouts) as f64)],
        );
        metric(
            "tempra_requests_failed_total",
            "counter",
            "Admitted requests the engine failed.",
            &[("", get(&self.failed_requests) as f64)],
        );
        metric(
            "tempra_requests_cancelled_total",
            "counter",
            "Requests whose client disconnected before the end.",
            &[("", get(&self.cancelled_requests) as f64)],
        );
        metric(
            "tempra_prompt_tokens_total",
            "counter",
            "Prompt tokens of admitted requests.",
            &[("", get(&self.prompt_tokens) as f64)],
        );
        metric(
            "tempra_prompt_tokens_cached_total",
            "counter",
            "Prompt tokens reused from a slot's KV cache (prompt cache hits).",
            &[("", get(&self.cached_prompt_tokens) as f64)],
        );
        metric(
            "tempra_completion_tokens_total",
            "counter",
            "Generated tokens.",
            &[("", get(&self.completion_tokens) as f64)],
        );
        metric(
            "tempra_decode_steps_total",
            "counter",
            "Batched decode passes (one read of the weights each).",
            &[("", get(&self.decode_steps) as f64)],
        );
        let decode_secs = get(&self.decode_nanos) as f64 * 1e-9;
        metric(
            "tempra_decode_seconds_total",
            "counter",
            "Time spent in batched decode passes.",
            &[("", decode_secs)],
        );
        metric(
            "tempra_prefill_seconds_total",
            "counter",
            "Time spent processing prompts.",
            &[("", get(&self.prefill_nanos) as f64 * 1e-9)],
        );
        let tok_s = if decode_secs > 0.0 {
            get(&self.decode_tokens) as f64 / decode_secs
        } else {
            0.0
        };
        metric(
            "tempra_decode_tokens_per_second",
            "gauge",
            "Aggregate decode throughput over all slots since start (decode tokens / decode time).",
            &[("", tok_s)],
        );
        metric("tempra_slots", "gauge", "KV slots.", &[("", slots as f64)]);
        metric(
            "tempra_slots_busy",
            "gauge",
            "KV slots running a request.",
            &[("", occupancy.busy as f64)],
        );
        metric(
            "tempra_queue_waiting",
            "gauge",
            "Requests waiting for a slot.",
            &[("", occupancy.waiting as f64)],
        );
        let stats = &connections.stats;
        metric(
            "tempra_http_connections",
            "gauge",
            "HTTP connections open.",
            &[("", connections.count() as f64)],
        );
        metric(
            "tempra_http_connections_busy",
            "gauge",
            "HTTP connections with a request in progress (this one included).",
            &[("", connections.busy_count() as f64)],
        );
        metric(
            "tempra_http_connections_accepted_total",
            "counter",
            "HTTP connections accepted.",
            &[("", get(&stats.accepted) as f64)],
        );
        let closed = |reason| connections.closed_by(reason) as f64;
        metric(
            "tempra_http_connections_closed_total",
            "counter",
            "HTTP connections the server closed: a request head slower than the header timeout, idle longer than the idle timeout, or evicted (the oldest without a request in progress) to admit a new one.",
            &[
                (
                    "{reason=\"header_timeout\"}",
                    closed(CloseReason::HeaderTimeout),
                ),
                (
                    "{reason=\"idle_timeout\"}",
                    closed(CloseReason::IdleTimeout),
                ),
                ("{reason=\"evicted\"}", closed(CloseReason::Evicted)),
            ],
        );
        metric(
            "tempra_http_connections_refused_total",
            "counter",
            "New HTTP connections answered 503 because every open connection had a request in progress.",
            &[("", get(&stats.refused) as f64)],
        );
        metric(
            "tempra_pool_hits_total",
            "counter",
            "Transient buffer pool acquisitions served from the cache.",
            &[("", pool.hits as f64)],
        );
        metric(
            "tempra_pool_misses_total",
            "counter",
            "Transient buffer pool acquisitions that allocated.",
            &[("", pool.misses as f64)],
        );
        metric(
            "tempra_pool_cached_bytes",
            "gauge",
            "Bytes cached in the transient buffer pool.",
            &[("", pool.cached_bytes as f64)],
        );
        metric(
            "tempra_pool_outstanding_bytes",
            "gauge",
            "Bytes of live transient buffers.",
            &[("", pool.outstanding_bytes as f64)],
        );
        metric(
            "tempra_pool_peak_outstanding_bytes",
            "gauge",
            "Peak bytes of live transient buffers.",
            &[("", pool.peak_outstanding_bytes as f64)],
        );
        out
    }
}
