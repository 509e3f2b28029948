//! Scratch for the tasks of one parallel call, leased once by the caller.
//!
//! A task that leased its own scratch made the number of blocks live at once depend on
//! the schedule: whether a worker took a chunk before the caller had finished them all.
//! A pool warmed up by a step where one thread ran every chunk then missed on a later
//! step where two ran at once (`cargo xtask leak-check`'s training scenario failed so, one
//! run in several). With one lease of a part per thread, made before the call, the pool
//! traffic of a call is the same whatever the schedule.

use std::sync::atomic::{AtomicU64, Ordering};

use tempra_pool::{HostLease, HostPool};
use tempra_tensor::{Result, TensorError};

use crate::parallel::DisjointWrites;

/// Equal parts of one pool lease, each lent to one running task at a time.
pub(crate) struct TaskScratch {
    /// The lease the parts live in (held until the call's tasks have ended).
    _lease: HostLease,
    /// The first f32 of the lease.
    base: DisjointWrites<f32>,
    /// f32s per part.
    floats: usize,
    /// Parts (at most 64).
    slots: usize,
    /// Bit `i` set while part `i` is lent.
    lent: AtomicU64,
    /// The pool a task falls back to should every part be lent.
    pool: HostPool,
    /// The op the scratch serves (for errors).
    op: &'static str,
}

impl TaskScratch {
    /// One lease of `slots` parts of `floats` f32s from `pool` for `op`; `slots` is the
    /// most tasks of the call that run at once (its `Parallel::threads()`), capped at 64.
    pub(crate) fn new(
        pool: &HostPool,
        op: &'static str,
        slots: usize,
        floats: usize,
    ) -> Result<Self> {
        let slots = slots.clamp(1, 64);
        let mut lease = acquire(pool, op, slots * floats)?;
        let base = DisjointWrites::new(lease.as_mut_slice::<f32>());
        Ok(Self {
            _lease: lease,
            base,
            floats,
            slots,
            lent: AtomicU64::new(0),
            pool: pool.clone(),
            op,
        })
    }

    /// Runs `f` on a free part (zeroed or not: whatever the last task left). Should no
    /// part be free — more tasks at once than the call was sized for — `f` gets a
    /// lease of its own instead.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut [f32]) -> Result<R>) -> Result<R> {
        let Some(slot) = self.claim() else {
            let mut own = acquire(&self.pool, self.op, self.floats)?;
            return f(&mut own.as_mut_slice::<f32>()[..self.floats]);
        };
        // SAFETY: part `slot` lies inside the lease (`slot < slots`, the lease holds
        // `slots · floats` f32s), and its bit in `lent` makes this task its only user
        // until `release`.
        let part = unsafe {
            std::slice::from_raw_parts_mut(self.base.ptr().add(slot * self.floats), self.floats)
        };
        let result = f(part);
        self.lent.fetch_and(!(1u64 << slot), Ordering::Release);
        result
    }

    /// Marks a free part lent and returns it.
    fn claim(&self) -> Option<usize> {
        let all = if self.slots == 64 {
            u64::MAX
        } else {
            (1u64 << self.slots) - 1
        };
        let mut lent = self.lent.load(Ordering::Relaxed);
        loop {
            let free = !lent & all;
            if free == 0 {
                return None;
            }
            let bit = free.trailing_zeros() as usize;
            match self.lent.compare_exchange_weak(
                lent,
                lent | (1u64 << bit),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(bit),
                Err(now) => lent = now,
            }
        }
    }
}

/// The most tasks a `parallel_for` over `n_items` with at least `min_items` per task (but
/// a short last one) runs at once on `threads` threads: the parts a [`TaskScratch`] for
/// it needs.
pub(crate) fn max_tasks(threads: usize, n_items: usize, min_items: usize) -> usize {
    threads.min(n_items.div_ceil(min_items.max(1))).max(1)
}

/// A pool lease of at least `floats` f32s of scratch for `op`.
pub(crate) fn acquire(pool: &HostPool, op: &'static str, floats: usize) -> Result<HostLease> {
    pool.acquire(floats * size_of::<f32>())
        .map_err(|source| TensorError::Pool { op, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_lent_one_task_at_a_time_and_reused() {
        let pool = HostPool::host();
        let scratch = TaskScratch::new(&pool, "test", 2, 8).unwrap();
        let misses = pool.stats().misses;
        let outer = scratch
            .with(|a| {
                a.fill(1.0);
                // A second task at once gets the other part, a third its own lease.
                let inner = scratch.with(|b| {
                    assert_ne!(b.as_ptr(), a.as_ptr());
                    let third = scratch.with(|c| Ok(c.len()))?;
                    Ok((b.as_ptr() as usize, third))
                })?;
                Ok((a.as_ptr() as usize, inner))
            })
            .unwrap();
        let (a, (b, third)) = outer;
        assert_eq!(third, 8);
        assert_eq!(
            pool.stats().misses,
            misses + 1,
            "the third task leased its own"
        );
        // Both parts free again: the next tasks get them back, no new lease.
        let again = scratch.with(|p| Ok(p.as_ptr() as usize)).unwrap();
        assert!(again == a || again == b);
        let third_again = scratch.with(|c| Ok(c.len())).unwrap();
        assert_eq!(third_again, 8);
        assert_eq!(pool.stats().misses, misses + 1);
    }
}
