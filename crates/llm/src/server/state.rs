//! `AppState`: what every HTTP handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::chat::ChatTemplate;
use crate::engine::Model;
use crate::server::admission::Admission;
use crate::server::metrics::Metrics;

/// The model, its chat template, the job queue and the counters.
#[derive(Debug)]
pub(crate) struct AppState {
    /// The loaded model (for its vocabulary and context length; the engine thread runs
    /// it).
    pub(crate) model: Arc<Model>,
    /// The model's id in responses (the file stem).
    pub(crate) model_id: String,
    /// The chat template.
    pub(crate) template: ChatTemplate,
    /// The job queue.
    pub(crate) admission: Arc<Admission>,
    /// The counters.
    pub(crate) metrics: Arc<Metrics>,
    /// KV slots.
    pub(crate) slots: usize,
    /// Request body limit in bytes.
    pub(crate) max_body_bytes: usize,
    /// Unix time the server started (the model's `created`).
    pub(crate) created: u64,
    next_id: AtomicU64,
}

impl AppState {
    /// The shared state.
    pub(crate) fn new(
        model: Arc<Model>,
        model_id: String,
        template: ChatTemplate,
        admission: Arc<Admission>,
        metrics: Arc<Metrics>,
        slots: usize,
        max_body_bytes: usize,
    ) -> AppState {
        AppState {
            model,
            model_id,
            template,
            admission,
            metrics,
            slots,
            max_body_bytes,
            created: unix_now(),
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh response id with `prefix` (`cmpl`, `chatcmpl`).
    pub(crate) fn response_id(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
