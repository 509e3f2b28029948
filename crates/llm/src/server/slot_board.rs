//! `SlotBoard`: what each KV slot is doing, as the engine thread last wrote it, for
//! `GET /slots` (counts only: no prompt or output text leaves the engine this way).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::server::slot::Slot;

/// One slot's gauges.
#[derive(Debug, Default)]
struct SlotGauge {
    processing: AtomicBool,
    /// Tokens the slot's KV cache holds.
    cached: AtomicUsize,
    /// The running job's prompt tokens.
    prompt: AtomicUsize,
    /// Tokens the running job generated.
    decoded: AtomicUsize,
}

/// Every slot's gauges, written by the engine thread, read by `GET /slots`.
#[derive(Debug)]
pub(crate) struct SlotBoard {
    slots: Vec<SlotGauge>,
}

impl SlotBoard {
    /// A board of `slots` idle slots.
    pub(crate) fn new(slots: usize) -> SlotBoard {
        SlotBoard {
            slots: (0..slots).map(|_| SlotGauge::default()).collect(),
        }
    }

    /// Records slot `index`'s state.
    pub(crate) fn record(&self, index: usize, slot: &Slot) {
        let Some(gauge) = self.slots.get(index) else {
            return;
        };
        let (prompt, decoded) = slot.job_counts().unwrap_or((0, 0));
        gauge.processing.store(!slot.is_idle(), Ordering::Relaxed);
        gauge.cached.store(slot.session.len(), Ordering::Relaxed);
        gauge.prompt.store(prompt, Ordering::Relaxed);
        gauge.decoded.store(decoded, Ordering::Relaxed);
    }

    /// The slots as `GET /slots` lists them, each with the context `n_ctx`.
    pub(crate) fn to_json(&self, n_ctx: usize) -> Value {
        let slots: Vec<Value> = self
            .slots
            .iter()
            .enumerate()
            .map(|(id, g)| {
                json!({
                    "id": id,
                    "n_ctx": n_ctx,
                    "is_processing": g.processing.load(Ordering::Relaxed),
                    "n_cached_tokens": g.cached.load(Ordering::Relaxed),
                    "n_prompt_tokens": g.prompt.load(Ordering::Relaxed),
                    "n_decoded": g.decoded.load(Ordering::Relaxed),
                })
            })
            .collect();
        Value::Array(slots)
    }
}
