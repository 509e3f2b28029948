//! Hit-path cost of `acquire` + drop against a fresh zeroed allocation of the same size,
//! single-threaded and with a second thread contending for the same pool.
//!
//! Two fresh baselines: `fresh_alloc_zeroed` asks the global allocator for a 64-byte
//! aligned zeroed block (for that alignment `std` calls `posix_memalign` + `memset`, so
//! every page is written up front), `fresh_host_memory` is the pool's own miss path
//! (`HostMemory`: zeroed through `calloc`, pages committed on first touch). Both then
//! touch every page once and free the block.
//!
//! `cargo bench -p tempra-pool --bench acquire`

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tempra_pool::{BufferPool, HostMemory, Memory};

const SIZES: [(usize, &str); 4] = [
    (256, "256B"),
    (64 << 10, "64KiB"),
    (4 << 20, "4MiB"),
    (64 << 20, "64MiB"),
];

/// A fresh allocation as a tensor would use it: zeroed, every page touched once, freed.
fn fresh_alloc(bytes: usize) {
    let layout = Layout::from_size_align(bytes, 64).expect("valid layout");
    // SAFETY: non-zero size; the pointer is checked, written within bounds and freed with
    // the same layout.
    unsafe {
        let ptr = alloc_zeroed(layout);
        assert!(!ptr.is_null());
        let mut at = 0;
        while at < bytes {
            ptr.add(at).write_volatile(1);
            at += 4096;
        }
        dealloc(black_box(ptr), layout);
    }
}

/// The pool's miss path without the pool: a fresh `HostMemory` block, every page touched
/// once, freed.
fn fresh_host_block(bytes: usize) {
    let mut block = HostMemory.allocate(bytes).expect("allocation");
    let ptr = block.as_mut_ptr();
    let mut at = 0;
    while at < bytes {
        // SAFETY: `at < bytes`, the block's size.
        unsafe { ptr.add(at).write_volatile(1) };
        at += 4096;
    }
    drop(black_box(block));
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pool");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for (bytes, name) in SIZES {
        let pool = BufferPool::host();
        drop(pool.acquire(bytes).unwrap()); // warm: the block is cached
        group.bench_function(BenchmarkId::new("hit", name), |b| {
            b.iter(|| drop(black_box(pool.acquire(black_box(bytes)).unwrap())))
        });

        group.bench_function(BenchmarkId::new("hit_contended_2t", name), |b| {
            b.iter_custom(|iters| {
                let stop = Arc::new(AtomicBool::new(false));
                let other = {
                    let (pool, stop) = (pool.clone(), Arc::clone(&stop));
                    std::thread::spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            drop(black_box(pool.acquire(bytes).unwrap()));
                        }
                    })
                };
                let start = Instant::now();
                for _ in 0..iters {
                    drop(black_box(pool.acquire(black_box(bytes)).unwrap()));
                }
                let elapsed = start.elapsed();
                stop.store(true, Ordering::Relaxed);
                other.join().unwrap();
                elapsed
            })
        });

        group.bench_function(BenchmarkId::new("fresh_alloc_zeroed", name), |b| {
            b.iter(|| fresh_alloc(black_box(bytes)))
        });

        group.bench_function(BenchmarkId::new("fresh_host_memory", name), |b| {
            b.iter(|| fresh_host_block(black_box(bytes)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
