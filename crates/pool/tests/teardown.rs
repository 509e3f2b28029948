//! Teardown: trim, close, leak detection, leases that outlive the pool.

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::thread;

use common::TestMemory;
use tempra_pool::{BufferPool, PoolError};

#[test]
fn trim_frees_every_cached_block() {
    let pool = BufferPool::new(TestMemory::new());
    let kept = pool.acquire(1000).unwrap();
    let leases: Vec<_> = [64, 4096, 100_000, 1 << 20]
        .iter()
        .map(|&b| pool.acquire(b).unwrap())
        .collect();
    drop(leases);
    let stats = pool.stats();
    assert_eq!(stats.cached_blocks, 4);
    assert_eq!(pool.memory().live_blocks(), 5);

    assert_eq!(pool.trim(), stats.cached_bytes);
    assert_eq!(pool.trim(), 0, "nothing left");
    let stats = pool.stats();
    assert_eq!((stats.cached_blocks, stats.cached_bytes), (0, 0));
    assert_eq!(pool.memory().live_blocks(), 1, "live leases are untouched");
    drop(kept);
    assert_eq!(
        pool.stats().cached_blocks,
        1,
        "the pool still caches after a trim"
    );
}

#[test]
fn close_reports_live_leases_as_a_leak() {
    let pool = BufferPool::new(TestMemory::new());
    let a = pool.acquire(100).unwrap(); // 128-byte block
    let b = pool.acquire(5000).unwrap(); // 8192-byte block
    drop(pool.acquire(64).unwrap()); // one cached

    let err = pool.close().unwrap_err();
    assert_eq!(
        err,
        PoolError::Leaked {
            leases: 2,
            bytes: 128 + 8192
        }
    );
    assert_eq!(
        err.to_string(),
        "pool closed with 2 live leases holding 8320 bytes"
    );
    assert_eq!(pool.stats().cached_blocks, 0, "close frees the cache");

    drop(a);
    assert_eq!(
        pool.close(),
        Err(PoolError::Leaked {
            leases: 1,
            bytes: 8192
        })
    );
    drop(b);
    assert_eq!(pool.close(), Ok(()));
    assert_eq!(pool.memory().live_blocks(), 0);
    // The pool stays usable after a close.
    drop(pool.acquire(64).unwrap());
    assert_eq!(pool.close(), Ok(()));
}

#[test]
fn host_leases_stay_valid_after_every_handle_is_dropped() {
    let pool = tempra_pool::BufferPool::host();
    let other = pool.clone();
    let mut lease = pool.acquire(4096).unwrap();
    lease.as_mut_slice::<u32>().fill(7);
    drop(pool);
    drop(other);
    assert!(lease.as_slice::<u32>().iter().all(|&v| v == 7));
    lease.as_mut_slice::<u32>()[1023] = 9;
    assert_eq!(lease.as_slice::<u32>()[1023], 9);
    assert_eq!(lease.as_bytes().len(), 4096);
    drop(lease); // frees the block directly (valgrind/miri would flag a bad free)
}

#[test]
fn blocks_of_leases_that_outlive_the_pool_are_freed_directly() {
    let pool = BufferPool::new(TestMemory::new());
    let live = pool.memory().live_counter();
    let a = pool.acquire(64).unwrap();
    let b = pool.acquire(1 << 20).unwrap();
    drop(pool.acquire(4096).unwrap()); // cached
    assert_eq!(live.load(Ordering::SeqCst), 3);

    drop(pool); // the last handle: the cache is freed, leases live on
    assert_eq!(live.load(Ordering::SeqCst), 2);
    drop(a); // freed, not cached
    assert_eq!(live.load(Ordering::SeqCst), 1);
    drop(b);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn dropping_one_handle_of_several_keeps_the_pool_open() {
    let pool = BufferPool::new(TestMemory::new());
    let other = pool.clone();
    assert!(pool.same_pool(&other));
    assert!(!pool.same_pool(&BufferPool::new(TestMemory::new())));
    let lease = pool.acquire(4096).unwrap();
    drop(pool);
    drop(lease);
    assert_eq!(other.stats().cached_blocks, 1, "still caching");
    assert_eq!(other.memory().live_blocks(), 1);
    drop(other.acquire(4096).unwrap());
    assert_eq!(other.stats().hits, 1);
}

#[test]
fn dropping_an_idle_pool_frees_everything() {
    let pool = BufferPool::new(TestMemory::new());
    let live = pool.memory().live_counter();
    for bytes in [64, 4096, 1 << 20] {
        drop(pool.acquire(bytes).unwrap());
    }
    assert_eq!(live.load(Ordering::SeqCst), 3);
    drop(pool);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn a_release_racing_the_last_handle_never_strands_a_block() {
    // A lease dropped on one thread while the last handle drops on another: its block
    // is either cached before the final trim (and freed by it) or freed directly, never
    // left in the cache of a closed pool (where it would sit until the last lease goes).
    for _ in 0..500 {
        let pool = BufferPool::new(TestMemory::new());
        let live = pool.memory().live_counter();
        let keeper = pool.acquire(64).unwrap(); // keeps the shared state alive
        let racer = pool.acquire(64).unwrap();
        let start = Arc::new(Barrier::new(2));
        let thread = {
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                drop(racer);
            })
        };
        start.wait();
        drop(pool);
        thread.join().unwrap();
        assert_eq!(
            live.load(Ordering::SeqCst),
            1,
            "only the keeper's block is live"
        );
        drop(keeper);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }
}
