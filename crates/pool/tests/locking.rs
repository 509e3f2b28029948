//! The pool's lock is never held while a block is made or freed.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::{TestMemory, id};
use tempra_pool::{BufferPool, PoolConfig};

const SLOW: usize = 1 << 20;
const WATCHDOG: Duration = Duration::from_secs(10);

#[test]
fn the_lock_is_not_held_while_a_fresh_block_is_made() {
    let entered = Arc::new(Barrier::new(2));
    let resume = Arc::new(Barrier::new(2));
    let memory = {
        let (entered, resume) = (Arc::clone(&entered), Arc::clone(&resume));
        TestMemory::with_hook(move |bytes| {
            if bytes == SLOW {
                entered.wait(); // inside `allocate` now
                resume.wait(); // until the test lets it finish
            }
            Ok(())
        })
    };
    let pool = BufferPool::new(memory);
    let cached = id(&pool.acquire(64).unwrap()); // one block in the cache

    let slow = {
        let pool = pool.clone();
        thread::spawn(move || pool.acquire(SLOW).map(|lease| lease.capacity()))
    };
    entered.wait(); // the slow miss is making its block

    // Everything that takes the lock must still go through. Done on a helper thread so a
    // held lock shows as a timeout, not a hung test.
    let (done, report) = mpsc::channel();
    let helper = {
        let pool = pool.clone();
        thread::spawn(move || {
            let hit = pool.acquire(64).unwrap(); // a hit
            let hit_id = id(&hit);
            let stats = pool.stats();
            let other_miss = pool.acquire(128).unwrap(); // another miss, made concurrently
            drop(hit); // a release
            drop(other_miss);
            let outstanding = pool.outstanding();
            done.send((hit_id, stats, outstanding)).unwrap();
        })
    };
    let (hit_id, stats, outstanding) = report
        .recv_timeout(WATCHDOG)
        .expect("the pool's lock was held while a fresh block was being made");
    helper.join().unwrap();
    assert_eq!(hit_id, cached);
    assert_eq!(
        (stats.hits, stats.misses),
        (1, 1),
        "the slow miss is not counted yet"
    );
    assert_eq!(
        outstanding, 0,
        "the slow lease is counted once its block exists"
    );

    resume.wait();
    assert_eq!(slow.join().unwrap().unwrap(), SLOW);
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses, stats.outstanding), (1, 3, 0));
}

#[test]
fn blocks_are_freed_outside_the_lock() {
    // Every freed block checks, from another thread, that the pool's lock is free.
    // A handle of the pool for the hook (a reference cycle, broken at the end).
    let slot: Arc<Mutex<Option<BufferPool<TestMemory>>>> = Arc::default();
    let held = Arc::new(AtomicBool::new(false));
    let memory = {
        let (slot, held) = (Arc::clone(&slot), Arc::clone(&held));
        TestMemory::with_drop_hook(move |_| {
            let Some(pool) = slot.lock().unwrap().clone() else {
                return;
            };
            let (done, report) = mpsc::channel();
            let helper = thread::spawn(move || {
                let _ = pool.stats();
                let _ = done.send(());
            });
            match report.recv_timeout(Duration::from_secs(5)) {
                Ok(()) => helper.join().unwrap(),
                Err(_) => held.store(true, Ordering::SeqCst),
            }
        })
    };
    let pool = BufferPool::with_config(
        memory,
        PoolConfig {
            max_cached_bytes: 4096,
        },
    );
    *slot.lock().unwrap() = Some(pool.clone());

    drop(pool.acquire(8192).unwrap()); // evicted: over the cap
    drop(pool.acquire(4096).unwrap()); // cached
    assert_eq!(pool.trim(), 4096); // trimmed
    assert_eq!(pool.stats().evictions, 1);
    assert_eq!(pool.memory().live_blocks(), 0);
    assert!(
        !held.load(Ordering::SeqCst),
        "a block was freed with the pool's lock held"
    );
    let cycle = slot.lock().unwrap().take();
    drop(cycle);
}
