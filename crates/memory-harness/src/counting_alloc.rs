//! `CountingAlloc`: the harness's global allocator. It forwards to the system allocator
//! and counts, with relaxed atomics (any thread may allocate), every allocation, every
//! free, the live heap bytes, their peak, and the allocations of [`LARGE_ALLOC_BYTES`] or
//! more.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The size from which an allocation counts as large (4 KiB): steady-state code must make
/// none of these.
pub const LARGE_ALLOC_BYTES: usize = 4096;

/// The counters one allocator updates. A plain value type apart from the allocator so
/// that its arithmetic is testable on a private instance.
#[derive(Debug, Default)]
pub struct HeapCounters {
    allocs: AtomicU64,
    frees: AtomicU64,
    large_allocs: AtomicU64,
    live_bytes: AtomicUsize,
    peak_live_bytes: AtomicUsize,
}

/// A snapshot of [`HeapCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapSnapshot {
    /// Allocations made (a `realloc` counts as one).
    pub allocs: u64,
    /// Frees made (a `realloc` counts as one allocation and no free).
    pub frees: u64,
    /// Allocations (or reallocations) of [`LARGE_ALLOC_BYTES`] or more.
    pub large_allocs: u64,
    /// Bytes allocated and not yet freed.
    pub live_bytes: usize,
    /// The most live bytes since the counters were made or [`HeapCounters::reset_peak`].
    pub peak_live_bytes: usize,
}

impl HeapSnapshot {
    /// Allocations made between `earlier` and this snapshot.
    pub fn allocs_since(&self, earlier: &HeapSnapshot) -> u64 {
        self.allocs - earlier.allocs
    }

    /// Large allocations made between `earlier` and this snapshot.
    pub fn large_allocs_since(&self, earlier: &HeapSnapshot) -> u64 {
        self.large_allocs - earlier.large_allocs
    }

    /// Live bytes now minus live bytes at `earlier` (negative when the heap shrank).
    pub fn live_growth_since(&self, earlier: &HeapSnapshot) -> i64 {
        self.live_bytes as i64 - earlier.live_bytes as i64
    }
}

impl HeapCounters {
    /// Zeroed counters.
    pub const fn new() -> Self {
        Self {
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
            large_allocs: AtomicU64::new(0),
            live_bytes: AtomicUsize::new(0),
            peak_live_bytes: AtomicUsize::new(0),
        }
    }

    /// Counts an allocation of `size` bytes.
    pub fn record_alloc(&self, size: usize) {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        if size >= LARGE_ALLOC_BYTES {
            self.large_allocs.fetch_add(1, Ordering::Relaxed);
        }
        let live = self.live_bytes.fetch_add(size, Ordering::Relaxed) + size;
        self.peak_live_bytes.fetch_max(live, Ordering::Relaxed);
    }

    /// Counts a free of `size` bytes.
    pub fn record_free(&self, size: usize) {
        self.frees.fetch_add(1, Ordering::Relaxed);
        self.live_bytes.fetch_sub(size, Ordering::Relaxed);
    }

    /// Counts a reallocation from `old` to `new` bytes: one allocation (large when `new`
    /// is), no free, live bytes moved by the difference.
    pub fn record_realloc(&self, old: usize, new: usize) {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        if new >= LARGE_ALLOC_BYTES {
            self.large_allocs.fetch_add(1, Ordering::Relaxed);
        }
        if new >= old {
            let live = self.live_bytes.fetch_add(new - old, Ordering::Relaxed) + (new - old);
            self.peak_live_bytes.fetch_max(live, Ordering::Relaxed);
        } else {
            self.live_bytes.fetch_sub(old - new, Ordering::Relaxed);
        }
    }

    /// Restarts peak tracking from the live bytes now.
    pub fn reset_peak(&self) {
        self.peak_live_bytes
            .store(self.live_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> HeapSnapshot {
        HeapSnapshot {
            allocs: self.allocs.load(Ordering::Relaxed),
            frees: self.frees.load(Ordering::Relaxed),
            large_allocs: self.large_allocs.load(Ordering::Relaxed),
            live_bytes: self.live_bytes.load(Ordering::Relaxed),
            peak_live_bytes: self.peak_live_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The process's counters (the ones [`CountingAlloc`] updates).
pub static HEAP: HeapCounters = HeapCounters::new();

/// The system allocator, counted in [`HEAP`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees hold; the counting only touches atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            HEAP.record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            HEAP.record_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (hence `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        HEAP.record_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by this allocator (hence `System`) with `layout`;
        // the caller upholds `realloc`'s contract for `new_size`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            HEAP.record_realloc(layout.size(), new_size);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's unit-test binary counts its own heap, as the harness binary does.
    #[global_allocator]
    static TEST_ALLOC: CountingAlloc = CountingAlloc;

    #[test]
    fn counts_allocs_frees_and_live_bytes() {
        let c = HeapCounters::new();
        c.record_alloc(100);
        c.record_alloc(5000);
        c.record_free(100);
        let s = c.snapshot();
        assert_eq!((s.allocs, s.frees, s.large_allocs), (2, 1, 1));
        assert_eq!(s.live_bytes, 5000);
        assert_eq!(s.peak_live_bytes, 5100);
    }

    #[test]
    fn large_threshold_is_inclusive() {
        let c = HeapCounters::new();
        c.record_alloc(LARGE_ALLOC_BYTES - 1);
        assert_eq!(c.snapshot().large_allocs, 0);
        c.record_alloc(LARGE_ALLOC_BYTES);
        assert_eq!(c.snapshot().large_allocs, 1);
    }

    #[test]
    fn realloc_moves_live_bytes_and_counts_one_alloc() {
        let c = HeapCounters::new();
        c.record_alloc(64);
        c.record_realloc(64, 8192);
        let s = c.snapshot();
        assert_eq!((s.allocs, s.frees, s.large_allocs), (2, 0, 1));
        assert_eq!((s.live_bytes, s.peak_live_bytes), (8192, 8192));
        c.record_realloc(8192, 16);
        let s = c.snapshot();
        assert_eq!((s.live_bytes, s.peak_live_bytes), (16, 8192));
    }

    #[test]
    fn reset_peak_restarts_from_live() {
        let c = HeapCounters::new();
        c.record_alloc(1000);
        c.record_free(1000);
        c.record_alloc(10);
        assert_eq!(c.snapshot().peak_live_bytes, 1000);
        c.reset_peak();
        assert_eq!(c.snapshot().peak_live_bytes, 10);
    }

    #[test]
    fn deltas_between_snapshots() {
        let c = HeapCounters::new();
        c.record_alloc(300);
        let a = c.snapshot();
        c.record_alloc(5000);
        c.record_free(300);
        let b = c.snapshot();
        assert_eq!(b.allocs_since(&a), 1);
        assert_eq!(b.large_allocs_since(&a), 1);
        assert_eq!(b.live_growth_since(&a), 4700);
        assert_eq!(a.live_growth_since(&b), -4700);
    }

    #[test]
    fn the_global_allocator_counts_this_process() {
        let before = HEAP.snapshot();
        let block = std::hint::black_box(vec![7u8; 2 * LARGE_ALLOC_BYTES]);
        let during = HEAP.snapshot();
        drop(block);
        let after = HEAP.snapshot();
        // Other test threads may allocate too: the counters only ever grow.
        assert!(during.large_allocs_since(&before) >= 1);
        assert!(after.frees > before.frees);
    }
}
