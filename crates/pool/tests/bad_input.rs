//! Requests at the edges: zero bytes, sizes that cannot be represented, sizes the
//! allocator refuses. None of them panics.

mod common;

use common::TestMemory;
use tempra_pool::{BufferPool, HOST_ALIGN, PoolError, size_class};

#[test]
fn a_zero_byte_request_is_valid() {
    let pool = BufferPool::host();
    let mut lease = pool.acquire(0).unwrap();
    assert_eq!(lease.len(), 0);
    assert!(lease.is_empty());
    assert_eq!(lease.capacity(), 64);
    assert!(lease.as_bytes().is_empty());
    assert!(lease.as_bytes_mut().is_empty());
    assert!(lease.as_slice::<f32>().is_empty());
    assert!(lease.as_mut_slice::<u64>().is_empty());
    assert_eq!(lease.as_ptr() as usize % HOST_ALIGN, 0);
    let addr = lease.as_ptr();
    drop(lease);
    // It shares the smallest class with every request up to 64 bytes.
    assert_eq!(pool.acquire(0).unwrap().as_ptr(), addr);
    assert_eq!(pool.acquire(64).unwrap().as_ptr(), addr);
    assert!(!pool.acquire(1).unwrap().is_empty());
    assert_eq!(pool.close(), Ok(()));
}

#[test]
fn usize_max_is_too_large_and_leaves_the_cache_alone() {
    let pool = BufferPool::host();
    drop(pool.acquire(4096).unwrap());
    let err = pool.acquire(usize::MAX).unwrap_err();
    assert_eq!(err, PoolError::SizeTooLarge { bytes: usize::MAX });
    assert!(err.to_string().contains(&usize::MAX.to_string()), "{err}");
    let stats = pool.stats();
    assert_eq!(
        (stats.cached_blocks, stats.reclaims, stats.misses),
        (1, 0, 1)
    );
}

#[test]
fn sizes_whose_class_overflows_or_exceeds_isize_max_are_too_large() {
    // Memory that would accept anything: the pool itself must refuse.
    let pool = BufferPool::new(TestMemory::new());
    drop(pool.acquire(64).unwrap());
    for bytes in [
        usize::MAX - 1,
        usize::MAX - 4095,
        isize::MAX as usize + 1,
        1 << 63 | 12345,
    ] {
        let err = pool.acquire(bytes).unwrap_err();
        assert_eq!(err, PoolError::SizeTooLarge { bytes }, "request of {bytes}");
        assert!(err.to_string().contains(&bytes.to_string()), "{err}");
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.cached_blocks, stats.reclaims),
        (1, 0),
        "the cache was not flushed"
    );
    assert_eq!(pool.memory().allocations(), 1, "never reached the memory");
}

#[test]
fn a_huge_representable_request_fails_without_panicking() {
    let pool = BufferPool::host();
    let bytes = isize::MAX as usize - 8192;
    let class = size_class(bytes).unwrap();
    match pool.acquire(bytes) {
        Err(err @ PoolError::AllocationFailed { bytes: failed, .. }) => {
            assert_eq!(failed, class, "the rounded size that failed");
            assert!(err.to_string().contains(&class.to_string()), "{err}");
        }
        // Refused by the pool (the request) or by the memory (the class plus the slack
        // a 2 MiB-aligned block needs no longer fits in `isize`).
        Err(err @ PoolError::SizeTooLarge { bytes: refused }) => {
            assert!(refused == bytes || refused == class, "{err}");
            assert!(err.to_string().contains(&refused.to_string()), "{err}");
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(lease) => panic!("allocated {} bytes?", lease.capacity()),
    }
    // The pool is still fine.
    let stats = pool.stats();
    assert_eq!((stats.outstanding, stats.misses), (0, 0));
    assert_eq!(pool.acquire(100).unwrap().len(), 100);
}

#[test]
fn host_memory_refuses_a_block_it_cannot_lay_out() {
    use tempra_pool::{HostMemory, Memory};
    let err = HostMemory.allocate(usize::MAX - 16).unwrap_err();
    assert_eq!(
        err,
        PoolError::SizeTooLarge {
            bytes: usize::MAX - 16
        }
    );
    assert!(matches!(
        HostMemory.allocate(isize::MAX as usize),
        Err(PoolError::SizeTooLarge { .. })
    ));
}
