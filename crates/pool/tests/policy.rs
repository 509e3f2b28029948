//! The allocation policy: size classes, smallest fit, LIFO reuse, bounded waste.

mod common;

use common::{TestMemory, id};
use proptest::prelude::*;
use tempra_pool::size_class::max_block_for;
use tempra_pool::{BufferPool, HOST_ALIGN, size_class};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

#[test]
fn small_requests_round_up_to_a_power_of_two() {
    let pool = BufferPool::new(TestMemory::new());
    let cases = [
        (0, 64),
        (1, 64),
        (64, 64),
        (65, 128),
        (1000, 1024),
        (1024, 1024),
        (4097, 8 * KIB),
        (20_000, 32 * KIB),
        (32 * KIB, 32 * KIB),
    ];
    // All held at once, so none can be served by another's cached block.
    let leases: Vec<_> = cases
        .iter()
        .map(|&(bytes, _)| pool.acquire(bytes).unwrap())
        .collect();
    for (lease, &(bytes, class)) in leases.iter().zip(&cases) {
        assert_eq!(lease.len(), bytes);
        assert_eq!(lease.capacity(), class, "request of {bytes} bytes");
        assert!(class.is_power_of_two());
    }
}

#[test]
fn large_requests_round_up_to_4_kib_multiples() {
    let pool = BufferPool::new(TestMemory::new());
    let cases = [
        (32 * KIB + 1, 36 * KIB),
        (100_000, 100 * KIB),
        (MIB, MIB),
        (MIB + 1, MIB + 4 * KIB),
        (5 * MIB + 3, 5 * MIB + 4 * KIB),
        (3 * MIB - 1, 3 * MIB),
    ];
    let leases: Vec<_> = cases
        .iter()
        .map(|&(bytes, _)| pool.acquire(bytes).unwrap())
        .collect();
    for (lease, &(bytes, class)) in leases.iter().zip(&cases) {
        assert_eq!(lease.len(), bytes);
        assert_eq!(lease.capacity(), class, "request of {bytes} bytes");
        assert_eq!(class % (4 * KIB), 0);
        assert!(class - bytes < 4 * KIB, "less than a page of rounding");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A fresh host pool hands out exactly the size class, 64-byte aligned.
    #[test]
    fn host_acquire_capacity_is_the_size_class(bytes in 0usize..(8 * MIB)) {
        let pool = BufferPool::host();
        let lease = pool.acquire(bytes).unwrap();
        prop_assert_eq!(lease.capacity(), size_class(bytes).unwrap());
        prop_assert_eq!(lease.len(), bytes);
        prop_assert_eq!(lease.as_bytes().len(), bytes);
        prop_assert_eq!(lease.as_ptr() as usize % HOST_ALIGN, 0);
    }

    /// On a pool with a warm cache, a lease is never smaller than its class nor larger
    /// than the waste bound allows (4x below 1 MiB, 2x from 1 MiB on).
    #[test]
    fn cached_blocks_respect_the_waste_bound(
        ops in prop::collection::vec((0usize..(6 * MIB), any::<bool>()), 1..64),
    ) {
        let pool = BufferPool::new(TestMemory::new());
        let mut held = Vec::new();
        for (bytes, keep) in ops {
            let lease = pool.acquire(bytes).unwrap();
            let class = size_class(bytes).unwrap();
            prop_assert!(lease.capacity() >= class);
            prop_assert!(lease.capacity() <= max_block_for(class));
            if class >= MIB {
                prop_assert!(lease.capacity() <= 2 * class);
            }
            prop_assert_eq!(lease.len(), bytes);
            if keep {
                held.push(lease);
            }
        }
    }
}

#[test]
fn acquire_takes_the_smallest_cached_block_that_fits() {
    // Cached in two different release orders: the free list is ordered by size, not by
    // release time, across classes.
    for reverse in [false, true] {
        let pool = BufferPool::host();
        let mut leases: Vec<_> = [1024, 128, 4096, 256]
            .iter()
            .map(|&bytes| pool.acquire(bytes).unwrap())
            .collect();
        let addr = |cap: usize, leases: &[tempra_pool::HostLease]| {
            leases
                .iter()
                .find(|l| l.capacity() == cap)
                .unwrap()
                .as_ptr()
        };
        let (a128, a256, a1024, a4096) = (
            addr(128, &leases),
            addr(256, &leases),
            addr(1024, &leases),
            addr(4096, &leases),
        );
        if reverse {
            leases.reverse();
        }
        drop(leases);
        assert_eq!(pool.stats().cached_blocks, 4);

        let a = pool.acquire(100).unwrap(); // class 128: exact
        assert_eq!((a.as_ptr(), a.capacity()), (a128, 128));
        let b = pool.acquire(129).unwrap(); // class 256: exact
        assert_eq!((b.as_ptr(), b.capacity()), (a256, 256));
        let c = pool.acquire(257).unwrap(); // class 512: none; 1024 is the smallest that fits
        assert_eq!((c.as_ptr(), c.capacity()), (a1024, 1024));
        let d = pool.acquire(300).unwrap(); // class 512: 4096 is above 4x, so a fresh block
        assert_eq!(d.capacity(), 512);
        assert_ne!(d.as_ptr(), a4096);
        let e = pool.acquire(2000).unwrap(); // class 2048: the 4096 block (2x)
        assert_eq!((e.as_ptr(), e.capacity()), (a4096, 4096));

        let stats = pool.stats();
        assert_eq!((stats.hits, stats.misses), (4, 5));
        assert_eq!(stats.cached_blocks, 0);
    }
}

#[test]
fn a_released_block_comes_back_for_the_same_size() {
    let pool = BufferPool::host();
    let lease = pool.acquire(1000).unwrap();
    let addr = lease.as_ptr();
    drop(lease);
    // The recycle invariant: same size, same block.
    let again = pool.acquire(1000).unwrap();
    assert_eq!(again.as_ptr(), addr);
    drop(again);
    // Any request of the same class too.
    let same_class = pool.acquire(513).unwrap();
    assert_eq!(same_class.as_ptr(), addr);
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses), (2, 1));
}

#[test]
fn within_a_class_the_block_released_last_comes_first() {
    let pool = BufferPool::host();
    let a = pool.acquire(4096).unwrap();
    let b = pool.acquire(4096).unwrap();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    drop(a);
    drop(b); // released last: warm in cache
    let first = pool.acquire(4096).unwrap();
    let second = pool.acquire(4000).unwrap();
    assert_eq!((first.as_ptr(), second.as_ptr()), (pb, pa));
    drop(second);
    drop(first); // now `first` (pb) is the last released
    assert_eq!(pool.acquire(4096).unwrap().as_ptr(), pb);

    // The same with ids, for a longer stack.
    let pool = BufferPool::new(TestMemory::new());
    let leases: Vec<_> = (0..5).map(|_| pool.acquire(300).unwrap()).collect();
    let order: Vec<usize> = leases.iter().map(id).collect();
    drop(leases); // released in order 0..5
    let back: Vec<_> = (0..5).map(|_| pool.acquire(300).unwrap()).collect();
    let ids: Vec<usize> = back.iter().map(id).collect();
    assert_eq!(ids, order.into_iter().rev().collect::<Vec<_>>());
}

#[test]
fn large_requests_never_get_a_block_over_twice_their_class() {
    let pool = BufferPool::host();
    let big = pool.acquire(4 * MIB).unwrap();
    let big_addr = big.as_ptr();
    drop(big);

    // 1 MiB: the cached 4 MiB block is 4x the class, so it is a miss.
    let one = pool.acquire(MIB).unwrap();
    assert_eq!(one.capacity(), MIB);
    assert_ne!(one.as_ptr(), big_addr);
    let stats = pool.stats();
    assert_eq!((stats.hits, stats.misses, stats.cached_blocks), (0, 2, 1));

    // 2 MiB + 1: class 2 MiB + 4 KiB, under 2x: the 4 MiB block fits the bound.
    let two = pool.acquire(2 * MIB + 1).unwrap();
    assert_eq!((two.as_ptr(), two.capacity()), (big_addr, 4 * MIB));
    drop(two);
    // Exactly 2x is still within the bound.
    let two = pool.acquire(2 * MIB).unwrap();
    assert_eq!((two.as_ptr(), two.capacity()), (big_addr, 4 * MIB));
    drop(two);
    // Just under: class 2 MiB - 4 KiB, a 4 MiB block would be over 2x.
    let under = pool.acquire(2 * MIB - 4 * KIB).unwrap();
    assert_eq!(under.capacity(), 2 * MIB - 4 * KIB);
    assert_ne!(under.as_ptr(), big_addr);
    assert_eq!(pool.stats().hits, 2);
}

#[test]
fn small_requests_take_cached_blocks_up_to_four_times_their_class() {
    let pool = BufferPool::new(TestMemory::new());
    let block = id(&pool.acquire(4096).unwrap());
    for bytes in [1024, 1000, 513, 4096, 2049] {
        let lease = pool.acquire(bytes).unwrap();
        assert_eq!(
            (id(&lease), lease.capacity()),
            (block, 4096),
            "request of {bytes}"
        );
    }
    // 512: a 4096 block would be 8x the class.
    let lease = pool.acquire(512).unwrap();
    assert_ne!(id(&lease), block);
    assert_eq!(lease.capacity(), 512);
}
