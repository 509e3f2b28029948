//! `AppState`: what every HTTP handler shares.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::chat::{ChatTemplate, ToolFormat};
use crate::engine::{Model, Pooling};
use crate::grammar::TokenTrie;
use crate::server::admission::Admission;
use crate::server::api_keys::KeyLimits;
use crate::server::connections::Connections;
use crate::server::metrics::Metrics;
use crate::server::slot_board::SlotBoard;

/// The model, its chat template, the job queue, the limits and the counters.
#[derive(Debug)]
pub(crate) struct AppState {
    /// The loaded model (for its vocabulary and context length; the engine thread runs
    /// it).
    pub(crate) model: Arc<Model>,
    /// The model's id in responses (the file stem).
    pub(crate) model_id: String,
    /// The chat template.
    pub(crate) template: ChatTemplate,
    /// How the template writes tool calls, if it does.
    pub(crate) tool_format: Option<ToolFormat>,
    /// Whether the template writes reasoning in `<think>` tags.
    pub(crate) reasoning: bool,
    /// The vocabulary's token pieces for constrained sampling (the tool-call and
    /// reasoning markers among control tokens render as text).
    pub(crate) trie: Arc<TokenTrie>,
    /// The job queue.
    pub(crate) admission: Arc<Admission>,
    /// The counters.
    pub(crate) metrics: Arc<Metrics>,
    /// The open connections (for the metrics).
    pub(crate) connections: Arc<Connections>,
    /// Per-key limits on requests in flight.
    pub(crate) key_limits: Arc<KeyLimits>,
    /// The roles chat messages may have.
    pub(crate) roles: Vec<String>,
    /// KV slots.
    pub(crate) slots: usize,
    /// How `/v1/embeddings` pools a sequence.
    pub(crate) pooling: Pooling,
    /// What each slot is doing (written by the engine thread).
    pub(crate) board: Arc<SlotBoard>,
    /// Request body limit in bytes.
    pub(crate) max_body_bytes: usize,
    /// Unix time the server started (the model's `created`).
    pub(crate) created: u64,
    /// The next response id.
    pub(crate) next_id: AtomicU64,
}

impl AppState {
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
