//! Counting the calls a backend hands to another implementation: the CPU backend's
//! delegations to the reference kernels, the GPU backend's host fallbacks. Both report
//! through [`crate::Backend::handoffs`] in the same shape, so a test or the conformance
//! suite reads them alike and a silent fallback cannot hide.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Calls handed on, per op name (the names of [`crate::Backend`]'s methods).
pub type Handoffs = BTreeMap<&'static str, u64>;

/// A thread-safe per-op counter a backend keeps for [`crate::Backend::handoffs`]. An op
/// allocates its map entry on its first hand-off only; later counts allocate nothing.
#[derive(Debug, Default)]
pub struct HandoffCounter {
    counts: Mutex<Handoffs>,
}

impl HandoffCounter {
    /// An empty counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one call of `op` handed on.
    pub fn count(&self, op: &'static str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(op)
            .or_default() += 1;
    }

    /// The counts so far.
    pub fn snapshot(&self) -> Handoffs {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The calls in `after` that `before` had not counted yet (per op, zero counts left out):
/// what one stretch of work handed on.
pub fn handoffs_since(before: &Handoffs, after: &Handoffs) -> Handoffs {
    after
        .iter()
        .filter_map(|(&op, &n)| {
            let new = n - before.get(op).copied().unwrap_or(0).min(n);
            (new > 0).then_some((op, new))
        })
        .collect()
}

/// `handoffs` as one line, `copy×2, quantize×1` (ops in name order), or `none`.
pub fn describe(handoffs: &Handoffs) -> String {
    if handoffs.is_empty() {
        return "none".into();
    }
    let ops: Vec<String> = handoffs.iter().map(|(op, n)| format!("{op}×{n}")).collect();
    ops.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_op_and_differences() {
        let c = HandoffCounter::new();
        c.count("copy");
        let before = c.snapshot();
        c.count("copy");
        c.count("quantize");
        let after = c.snapshot();
        assert_eq!(after.get("copy"), Some(&2));
        let since = handoffs_since(&before, &after);
        assert_eq!(since, Handoffs::from([("copy", 1), ("quantize", 1)]));
        assert_eq!(describe(&since), "copy×1, quantize×1");
        assert_eq!(describe(&Handoffs::new()), "none");
    }
}
