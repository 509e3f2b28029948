//! The byte budget: `max_cached_bytes` caps what sits in the cache.

mod common;

use common::{TestMemory, id};
use tempra_pool::{BufferPool, DEFAULT_MAX_CACHED_BYTES, PoolConfig};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const CAP: usize = MIB;

fn capped_pool(max_cached_bytes: usize) -> BufferPool<TestMemory> {
    BufferPool::with_config(TestMemory::new(), PoolConfig { max_cached_bytes })
}

#[test]
fn the_default_budget_is_one_gib() {
    assert_eq!(DEFAULT_MAX_CACHED_BYTES, 1 << 30);
    assert_eq!(PoolConfig::default().max_cached_bytes, 1 << 30);
    assert_eq!(BufferPool::host().config(), PoolConfig::default());
    let config = PoolConfig {
        max_cached_bytes: 123,
    };
    assert_eq!(
        BufferPool::with_config(TestMemory::new(), config).config(),
        config
    );
}

#[test]
fn a_block_larger_than_the_cap_is_freed_not_cached() {
    let pool = capped_pool(CAP);
    let lease = pool.acquire(2 * MIB).unwrap();
    assert_eq!(pool.memory().live_blocks(), 1);
    drop(lease);
    let stats = pool.stats();
    assert_eq!(
        (stats.evictions, stats.cached_blocks, stats.cached_bytes),
        (1, 0, 0)
    );
    assert_eq!(
        pool.memory().live_blocks(),
        0,
        "the evicted block was freed"
    );
    // So the next request of that size is a miss.
    drop(pool.acquire(2 * MIB).unwrap());
    assert_eq!(pool.stats().misses, 2);
}

#[test]
fn a_block_that_would_push_the_cache_over_the_cap_is_freed() {
    let pool = capped_pool(CAP);
    let a = pool.acquire(512 * KIB).unwrap();
    let b = pool.acquire(512 * KIB).unwrap();
    let c = pool.acquire(512 * KIB).unwrap();
    let b_id = id(&b);
    drop(a);
    assert_eq!(pool.stats().cached_bytes, 512 * KIB);
    drop(b); // exactly at the cap: still cached
    assert_eq!(pool.stats().cached_bytes, CAP);
    assert_eq!(pool.stats().evictions, 0);
    drop(c); // would go over: freed
    let stats = pool.stats();
    assert_eq!(
        (stats.evictions, stats.cached_blocks, stats.cached_bytes),
        (1, 2, CAP)
    );
    assert_eq!(pool.memory().live_blocks(), 2);
    // The cache kept the earlier blocks; b was released last among them.
    assert_eq!(id(&pool.acquire(512 * KIB).unwrap()), b_id);
}

#[test]
fn a_zero_budget_caches_nothing() {
    let pool = capped_pool(0);
    for _ in 0..3 {
        drop(pool.acquire(64).unwrap());
    }
    let stats = pool.stats();
    assert_eq!(
        (
            stats.hits,
            stats.misses,
            stats.evictions,
            stats.cached_bytes
        ),
        (0, 3, 3, 0)
    );
    assert_eq!(pool.memory().live_blocks(), 0);
}

#[test]
fn cached_bytes_never_exceed_the_cap_under_random_traffic() {
    let pool = capped_pool(CAP);
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below as u64) as usize
    };
    let mut held = Vec::new();
    for _ in 0..20_000 {
        if held.is_empty() || (held.len() < 16 && next(2) == 0) {
            let bytes = match next(4) {
                0 => next(2 * MIB),
                _ => next(64 * KIB),
            };
            held.push(pool.acquire(bytes).unwrap());
        } else {
            let at = next(held.len());
            drop(held.swap_remove(at));
        }
        let stats = pool.stats();
        assert!(stats.cached_bytes <= CAP, "{stats:?}");
        // No block is lost: every live block is either leased or cached.
        assert_eq!(
            pool.memory().live_blocks(),
            stats.outstanding + stats.cached_blocks
        );
    }
    let stats = pool.stats();
    assert!(stats.evictions > 0 && stats.hits > 0, "{stats:?}");
}
