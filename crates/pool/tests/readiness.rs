//! The readiness hook: a cached block is handed out again only once its `Memory` says
//! it is ready (on a GPU: once the work that used it has completed).

mod common;

use std::sync::atomic::Ordering;

use common::{TestMemory, id};
use tempra_pool::{BufferPool, HostMemory, Memory};

#[test]
fn a_cached_block_that_is_not_ready_is_skipped_until_it_is() {
    let pool = BufferPool::new(TestMemory::new());
    let a = pool.acquire(4096).unwrap();
    let (a_id, a_ready) = (id(&a), a.block().ready.clone());
    a_ready.store(false, Ordering::SeqCst); // work using it is still queued
    drop(a);
    assert_eq!(pool.stats().cached_blocks, 1);

    // Not ready: a miss, a fresh block.
    let b = pool.acquire(4096).unwrap();
    assert_ne!(id(&b), a_id);
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses, stats.cached_blocks), (0, 2, 1));
    drop(b);

    // Ready now: handed out (after b, which was released last).
    a_ready.store(true, Ordering::SeqCst);
    let first = pool.acquire(4096).unwrap();
    let second = pool.acquire(4096).unwrap();
    assert_ne!(id(&first), a_id);
    assert_eq!(id(&second), a_id);
    assert_eq!(pool.stats().hits, 2);
}

#[test]
fn a_busy_block_on_top_does_not_hide_ready_blocks_below_it() {
    let pool = BufferPool::new(TestMemory::new());
    let x = pool.acquire(256).unwrap();
    let y = pool.acquire(256).unwrap();
    let (x_id, y_id, y_ready) = (id(&x), id(&y), y.block().ready.clone());
    drop(x);
    y_ready.store(false, Ordering::SeqCst);
    drop(y); // released last, but busy
    let got = pool.acquire(256).unwrap();
    assert_eq!(id(&got), x_id, "the ready block below the busy top");
    let fresh = pool.acquire(256).unwrap();
    assert!(
        id(&fresh) != x_id && id(&fresh) != y_id,
        "y still busy: a fresh block"
    );
    y_ready.store(true, Ordering::SeqCst);
    assert_eq!(id(&pool.acquire(256).unwrap()), y_id);
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses), (2, 3));
}

#[test]
fn a_busy_small_block_falls_through_to_a_larger_ready_one() {
    let pool = BufferPool::new(TestMemory::new());
    let small = pool.acquire(1024).unwrap();
    let large = pool.acquire(2048).unwrap();
    let large_id = id(&large);
    small.block().ready.store(false, Ordering::SeqCst);
    drop(small);
    drop(large);
    let got = pool.acquire(1000).unwrap();
    assert_eq!((id(&got), got.capacity()), (large_id, 2048));
}

#[test]
fn busy_blocks_still_count_against_the_budget_and_are_trimmed() {
    let pool = BufferPool::new(TestMemory::new());
    let a = pool.acquire(4096).unwrap();
    a.block().ready.store(false, Ordering::SeqCst);
    drop(a);
    assert_eq!(pool.stats().cached_bytes, 4096);
    assert_eq!(pool.trim(), 4096);
    assert_eq!(pool.memory().live_blocks(), 0);
}

#[test]
fn host_memory_is_always_ready() {
    let block = HostMemory.allocate(64).unwrap();
    assert!(HostMemory.is_ready(&block));
}
