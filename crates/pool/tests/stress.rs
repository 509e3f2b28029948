//! Many threads acquiring and dropping random sizes from one pool: no two live leases
//! ever overlap, every lease's contents survive until it drops, and the counters add up.
//!
//! `TEMPRA_STRESS_OPS` sets the operations per thread (default 100 000), e.g. 2000 for a
//! run under valgrind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use tempra_pool::{BufferPool, HostLease, HostPool, PoolConfig};

const THREADS: usize = 8;
const DEFAULT_OPS: usize = 100_000;
/// The most leases one thread holds at once.
const MAX_LIVE: usize = 6;
/// A small budget, so that evictions happen too.
const CAP: usize = 16 << 20;
/// One pattern word every this many bytes (one per cache line).
const STRIDE: usize = 64;

fn ops_per_thread() -> usize {
    match std::env::var("TEMPRA_STRESS_OPS") {
        Ok(value) => value.parse().expect("TEMPRA_STRESS_OPS must be a number"),
        Err(_) => DEFAULT_OPS,
    }
}

/// xorshift64*: enough randomness, no dependency, reproducible per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as usize % n
    }

    /// Sizes across all classes: mostly small, some page-multiple ones, a few large
    /// enough for the 2x bound.
    fn size(&mut self) -> usize {
        match self.below(100) {
            0..=69 => self.below(4097),              // 64 B .. 4 KiB classes, and 0
            70..=96 => 4096 + self.below(252 << 10), // up to 256 KiB
            _ => (256 << 10) + self.below((3 << 20) - (256 << 10)), // up to 3 MiB
        }
    }
}

/// Live block ranges `[start, end)` of every thread, keyed by start.
struct Registry(Mutex<BTreeMap<usize, (usize, u64)>>);

impl Registry {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, (usize, u64)>> {
        self.0.lock().unwrap()
    }

    fn register(&self, lease: &HostLease, tag: u64) {
        let start = lease.as_ptr() as usize;
        let end = start + lease.capacity();
        let mut live = self.lock();
        if let Some((&s, &(e, t))) = live.range(..end).next_back() {
            assert!(
                e <= start,
                "lease {tag:#x} [{start:#x}, {end:#x}) overlaps live lease {t:#x} [{s:#x}, {e:#x})"
            );
        }
        live.insert(start, (end, tag));
    }

    fn unregister(&self, lease: &HostLease, tag: u64) {
        let removed = self.lock().remove(&(lease.as_ptr() as usize));
        assert_eq!(removed.map(|(_, t)| t), Some(tag));
    }
}

/// Writes `tag`-derived words through the lease (one per cache line, plus the tail).
fn fill(lease: &mut HostLease, tag: u64) {
    for (i, word) in lease
        .as_mut_slice::<u64>()
        .iter_mut()
        .enumerate()
        .step_by(STRIDE / 8)
    {
        *word = tag ^ i as u64;
    }
    let len = lease.len();
    for byte in &mut lease.as_bytes_mut()[len - len % 8..] {
        *byte = tag as u8;
    }
}

/// Checks what `fill` wrote is intact.
fn verify(lease: &HostLease, tag: u64) {
    for (i, &word) in lease
        .as_slice::<u64>()
        .iter()
        .enumerate()
        .step_by(STRIDE / 8)
    {
        assert_eq!(
            word,
            tag ^ i as u64,
            "lease {tag:#x} overwritten at word {i}"
        );
    }
    let len = lease.len();
    assert!(
        lease.as_bytes()[len - len % 8..]
            .iter()
            .all(|&b| b == tag as u8)
    );
}

/// What one worker did.
#[derive(Default)]
struct Tally {
    acquires: u64,
    requested: u64,
}

fn worker(pool: HostPool, registry: Arc<Registry>, thread: usize, ops: usize) -> Tally {
    let mut rng =
        Rng(0x9E37_79B9_7F4A_7C15 ^ (thread as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut live: Vec<(HostLease, u64)> = Vec::with_capacity(MAX_LIVE);
    let mut tally = Tally::default();
    for op in 0..ops {
        if live.is_empty() || (live.len() < MAX_LIVE && rng.below(2) == 0) {
            let bytes = rng.size();
            let mut lease = pool.acquire(bytes).unwrap();
            assert_eq!(lease.len(), bytes);
            let tag = (thread as u64) << 56 | op as u64;
            registry.register(&lease, tag);
            fill(&mut lease, tag);
            tally.acquires += 1;
            tally.requested += bytes as u64;
            live.push((lease, tag));
        } else {
            let (lease, tag) = live.swap_remove(rng.below(live.len()));
            verify(&lease, tag);
            registry.unregister(&lease, tag);
            drop(lease);
        }
    }
    for (lease, tag) in live {
        verify(&lease, tag);
        registry.unregister(&lease, tag);
    }
    tally
}

#[test]
fn threads_never_share_a_live_block_and_the_counters_add_up() {
    let ops = ops_per_thread();
    let started = Instant::now();
    let pool = BufferPool::with_config(
        tempra_pool::HostMemory,
        PoolConfig {
            max_cached_bytes: CAP,
        },
    );
    let registry = Arc::new(Registry(Mutex::new(BTreeMap::new())));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (pool, registry) = (pool.clone(), Arc::clone(&registry));
            thread::spawn(move || worker(pool, registry, t, ops))
        })
        .collect();

    // Watch the budget while they run.
    while !workers.iter().all(|w| w.is_finished()) {
        let stats = pool.stats();
        assert!(stats.cached_bytes <= CAP, "{stats:?}");
        thread::sleep(Duration::from_millis(2));
    }
    let (mut acquires, mut requested) = (0, 0);
    for worker in workers {
        let tally = worker.join().unwrap();
        acquires += tally.acquires;
        requested += tally.requested;
    }

    let stats = pool.stats();
    eprintln!(
        "{THREADS} threads x {ops} ops in {:?}: {stats:?}",
        started.elapsed()
    );
    assert!(registry.lock().is_empty());
    assert_eq!(stats.hits + stats.misses, acquires);
    assert_eq!(stats.requested_bytes, requested);
    assert!(stats.requested_bytes <= stats.handed_out_bytes);
    assert_eq!((stats.outstanding, stats.outstanding_bytes), (0, 0));
    assert!(stats.cached_bytes <= CAP);
    assert!(stats.peak_outstanding_bytes > 0);
    if ops >= 1000 {
        assert!(
            stats.hits > 0 && stats.misses > 0 && stats.evictions > 0,
            "{stats:?}"
        );
    }
    assert_eq!(pool.close(), Ok(()));
}
