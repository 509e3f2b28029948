//! The counters of `stats()`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{TestMemory, out_of_memory};
use tempra_pool::{BufferPool, PoolConfig, PoolError, PoolStats};

#[test]
fn counters_follow_acquires_and_releases() {
    let pool = BufferPool::new(TestMemory::new());
    assert_eq!(pool.stats(), PoolStats::default());
    assert_eq!(pool.stats().hit_rate(), 0.0);

    let a = pool.acquire(100).unwrap(); // class 128: miss
    let b = pool.acquire(5000).unwrap(); // class 8192: miss
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses), (0, 2));
    assert_eq!(
        (stats.outstanding, stats.outstanding_bytes),
        (2, 128 + 8192)
    );
    assert_eq!(stats.peak_outstanding_bytes, 8320);
    assert_eq!(
        (stats.requested_bytes, stats.handed_out_bytes),
        (5100, 8320)
    );
    assert_eq!((stats.cached_blocks, stats.cached_bytes), (0, 0));
    assert_eq!(pool.outstanding(), 2);

    drop(a);
    let stats = pool.stats();
    assert_eq!((stats.outstanding, stats.outstanding_bytes), (1, 8192));
    assert_eq!((stats.cached_blocks, stats.cached_bytes), (1, 128));
    assert_eq!(stats.peak_outstanding_bytes, 8320, "the peak stays");

    let c = pool.acquire(128).unwrap(); // hit
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses), (1, 2));
    assert_eq!(
        (stats.requested_bytes, stats.handed_out_bytes),
        (5228, 8448)
    );
    assert_eq!((stats.cached_blocks, stats.cached_bytes), (0, 0));
    assert!((stats.hit_rate() - 1.0 / 3.0).abs() < 1e-12);

    drop(b);
    drop(c);
    let stats = pool.stats();
    assert_eq!((stats.outstanding, stats.outstanding_bytes), (0, 0));
    assert_eq!((stats.cached_blocks, stats.cached_bytes), (2, 8320));
    assert_eq!((stats.evictions, stats.reclaims), (0, 0));
}

#[test]
fn reset_peak_restarts_from_what_is_outstanding() {
    let pool = BufferPool::new(TestMemory::new());
    let a = pool.acquire(4096).unwrap();
    let b = pool.acquire(8192).unwrap();
    drop(b);
    assert_eq!(pool.stats().peak_outstanding_bytes, 4096 + 8192);
    pool.reset_peak();
    assert_eq!(pool.stats().peak_outstanding_bytes, 4096);
    let c = pool.acquire(1024).unwrap();
    assert_eq!(pool.stats().peak_outstanding_bytes, 4096 + 1024);
    drop((a, c));
    pool.reset_peak();
    assert_eq!(pool.stats().peak_outstanding_bytes, 0);
}

#[test]
fn evictions_count_blocks_freed_for_the_budget() {
    let pool = BufferPool::with_config(
        TestMemory::new(),
        PoolConfig {
            max_cached_bytes: 4096,
        },
    );
    drop(pool.acquire(4096).unwrap()); // cached
    drop(pool.acquire(8192).unwrap()); // over the cap: evicted
    let a = pool.acquire(4096).unwrap(); // hit
    let b = pool.acquire(4096).unwrap(); // miss
    drop(a);
    drop(b); // the cache is full: evicted
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses, stats.evictions), (1, 3, 2));
    assert_eq!((stats.cached_blocks, stats.cached_bytes), (1, 4096));
}

/// A memory that fails the next `failures` allocations.
fn failing_memory() -> (TestMemory, Arc<AtomicUsize>) {
    let failures = Arc::new(AtomicUsize::new(0));
    let memory = {
        let failures = Arc::clone(&failures);
        TestMemory::with_hook(move |bytes| {
            let fail = failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fail {
                Err(out_of_memory(bytes))
            } else {
                Ok(())
            }
        })
    };
    (memory, failures)
}

#[test]
fn a_failed_allocation_frees_the_cache_and_retries_once() {
    let (memory, failures) = failing_memory();
    let pool = BufferPool::new(memory);
    drop(pool.acquire(64).unwrap());
    drop(pool.acquire(4096).unwrap());
    assert_eq!(pool.stats().cached_blocks, 2);

    // Fails once with something cached: the pool trims, counts a reclaim, and retries.
    failures.store(1, Ordering::SeqCst);
    let lease = pool.acquire(1 << 20).unwrap();
    let stats = pool.stats();
    assert_eq!(
        (stats.reclaims, stats.misses, stats.cached_blocks),
        (1, 3, 0)
    );
    assert_eq!(
        pool.memory().live_blocks(),
        1,
        "only the new lease's block is live"
    );
    drop(lease);

    // Fails twice: the retry fails too, and the error comes back.
    failures.store(2, Ordering::SeqCst);
    let err = pool.acquire(8192).unwrap_err();
    assert_eq!(err, out_of_memory(8192));
    let stats = pool.stats();
    assert_eq!(
        (stats.reclaims, stats.misses, stats.cached_blocks),
        (2, 3, 0)
    );

    // Fails with nothing cached: nothing to reclaim, no retry, no counts.
    failures.store(1, Ordering::SeqCst);
    assert!(matches!(
        pool.acquire(64),
        Err(PoolError::AllocationFailed { bytes: 64, .. })
    ));
    let stats = pool.stats();
    assert_eq!((stats.reclaims, stats.misses, stats.outstanding), (2, 3, 0));
    assert_eq!(
        stats.requested_bytes,
        64 + 4096 + (1 << 20),
        "failed requests are not counted"
    );
    assert_eq!(failures.load(Ordering::SeqCst), 0);
}
