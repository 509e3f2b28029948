//! Submission tracking: which queue submissions have completed on the GPU.
//!
//! Every submit gets the next index (1, 2, ...). Work being recorded belongs to the index
//! the next submit will get ([`SubmissionTracker::recording`]). When the GPU finishes a
//! submission, a `Queue::on_submitted_work_done` callback (run inside `Device::poll`)
//! raises [`SubmissionTracker::completed`]. A buffer stamped with index `n` is idle once
//! `completed >= n`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Submitted and completed submission indices.
#[derive(Debug, Default)]
pub(crate) struct SubmissionTracker {
    submitted: AtomicU64,
    completed: Arc<AtomicU64>,
}

impl SubmissionTracker {
    /// The index the work being recorded now will be submitted under.
    pub(crate) fn recording(&self) -> u64 {
        self.submitted.load(Ordering::Acquire) + 1
    }

    /// The highest index known to have completed.
    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// Whether submitted work is still in flight.
    pub(crate) fn in_flight(&self) -> bool {
        self.submitted.load(Ordering::Acquire) > self.completed()
    }

    /// Whether work stamped with `index` has completed.
    pub(crate) fn is_done(&self, index: u64) -> bool {
        index <= self.completed()
    }

    /// Submits `commands` under the next index and arranges for `completed` to reach it
    /// when the GPU is done. Callers serialize submits (they hold the recorder's lock), so
    /// indices follow queue order.
    pub(crate) fn submit(
        &self,
        queue: &wgpu::Queue,
        commands: impl IntoIterator<Item = wgpu::CommandBuffer>,
    ) -> u64 {
        let index = self.submitted.load(Ordering::Acquire) + 1;
        queue.submit(commands);
        self.submitted.store(index, Ordering::Release);
        let completed = Arc::clone(&self.completed);
        queue.on_submitted_work_done(move || {
            completed.fetch_max(index, Ordering::AcqRel);
        });
        index
    }
}
