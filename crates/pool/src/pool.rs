//! `BufferPool`: the allocation policy, generic over [`Memory`].

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::PoolError;
use crate::free_list::FreeList;
use crate::host::HostMemory;
use crate::lease::Lease;
use crate::memory::Memory;
use crate::size_class::{max_block_for, size_class};
use crate::stats::PoolStats;

/// The default cap on cached bytes: 1 GiB.
pub const DEFAULT_MAX_CACHED_BYTES: usize = 1 << 30;

/// Settings of a [`BufferPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// The most bytes the cache may hold. A released block that alone exceeds this, or
    /// would push the cached bytes over it, is freed instead of cached.
    pub max_cached_bytes: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            max_cached_bytes: DEFAULT_MAX_CACHED_BYTES,
        }
    }
}

/// Counters and the cache, guarded by one mutex (the hot path takes it once per acquire
/// and once per release, so counting under it costs nothing extra: plain integers here
/// instead of atomics outside save four atomic read-modify-writes per acquire/release).
struct Locked<B> {
    free: FreeList<B>,
    /// Live leases.
    outstanding: usize,
    /// Bytes held by live leases (block sizes).
    outstanding_bytes: usize,
    /// Set when the last handle dropped: leases then free their blocks directly. Kept
    /// under the lock so a release racing with the last handle's drop cannot cache a
    /// block after the final trim.
    closed: bool,
    hits: u64,
    misses: u64,
    reclaims: u64,
    evictions: u64,
    requested_bytes: u64,
    handed_out_bytes: u64,
    peak_outstanding_bytes: usize,
}

impl<B> Locked<B> {
    /// Counts a lease of `size` bytes handed out for a request of `bytes`.
    #[inline]
    fn account(&mut self, bytes: usize, size: usize) {
        self.outstanding += 1;
        self.outstanding_bytes += size;
        self.peak_outstanding_bytes = self.peak_outstanding_bytes.max(self.outstanding_bytes);
        self.requested_bytes += bytes as u64;
        self.handed_out_bytes += size as u64;
    }
}

/// The state every handle and lease of one pool shares.
pub(crate) struct Shared<M: Memory> {
    pub(crate) memory: M,
    config: PoolConfig,
    locked: Mutex<Locked<M::Block>>,
    /// Live `BufferPool` handles.
    handles: AtomicUsize,
}

impl<M: Memory> Shared<M> {
    fn lock(&self) -> MutexGuard<'_, Locked<M::Block>> {
        // A panic while holding the lock cannot leave the free list inconsistent (every
        // update is a handful of plain assignments), so a poisoned lock is still usable.
        self.locked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Returns a released block: cached, or freed when the pool is closed or the block
    /// does not fit the budget.
    #[inline]
    pub(crate) fn release(&self, block: M::Block, size: usize) {
        let mut locked = self.lock();
        locked.outstanding -= 1;
        locked.outstanding_bytes -= size;
        let cap = self.config.max_cached_bytes;
        if locked.closed {
            drop(locked);
            drop(block); // freed outside the lock
        } else if size > cap || locked.free.bytes() + size > cap {
            locked.evictions += 1;
            drop(locked);
            drop(block); // freed outside the lock
        } else {
            locked.free.put(block, size);
        }
    }
}

/// A size-bucketed pool of reusable memory blocks.
///
/// Cheap to clone (an `Arc` inside), `Send + Sync`. [`acquire`](Self::acquire) hands out
/// a [`Lease`] that returns its block to the pool when dropped. See the crate docs for
/// the policy.
pub struct BufferPool<M: Memory> {
    shared: Arc<Shared<M>>,
}

/// A pool of host memory.
pub type HostPool = BufferPool<HostMemory>;

impl BufferPool<HostMemory> {
    /// A host pool with the default budget (1 GiB cached).
    pub fn host() -> Self {
        Self::new(HostMemory)
    }
}

impl<M: Memory> BufferPool<M> {
    /// A pool over `memory` with the default settings.
    pub fn new(memory: M) -> Self {
        Self::with_config(memory, PoolConfig::default())
    }

    /// A pool over `memory` with `config`.
    pub fn with_config(memory: M, config: PoolConfig) -> Self {
        let locked = Locked {
            free: FreeList::new(),
            outstanding: 0,
            outstanding_bytes: 0,
            closed: false,
            hits: 0,
            misses: 0,
            reclaims: 0,
            evictions: 0,
            requested_bytes: 0,
            handed_out_bytes: 0,
            peak_outstanding_bytes: 0,
        };
        Self {
            shared: Arc::new(Shared {
                memory,
                config,
                locked: Mutex::new(locked),
                handles: AtomicUsize::new(1),
            }),
        }
    }

    /// The memory source.
    pub fn memory(&self) -> &M {
        &self.shared.memory
    }

    /// The settings.
    pub fn config(&self) -> PoolConfig {
        self.shared.config
    }

    /// Leases a block of at least `bytes` bytes (a zero-byte request is valid).
    ///
    /// Takes the smallest ready cached block of the request's size class or above (within
    /// the waste bound), else makes a fresh one without holding the lock. If making it
    /// fails, frees every cached block and tries once more.
    ///
    /// A request whose size class overflows or exceeds `isize::MAX` fails with
    /// [`PoolError::SizeTooLarge`] naming the request, and leaves the cache alone.
    pub fn acquire(&self, bytes: usize) -> Result<Lease<M>, PoolError> {
        let shared = &*self.shared;
        let class = match size_class(bytes) {
            Some(class) if class <= isize::MAX as usize => class,
            _ => return Err(PoolError::SizeTooLarge { bytes }),
        };
        let mut locked = shared.lock();
        let cached = locked
            .free
            .take(class, max_block_for(class), |b| shared.memory.is_ready(b));
        if let Some((block, size)) = cached {
            locked.hits += 1;
            locked.account(bytes, size);
            drop(locked);
            return Ok(Lease::new(block, bytes, size, Arc::clone(&self.shared)));
        }
        drop(locked); // never held while making a fresh block
        self.acquire_fresh(bytes, class)
    }

    /// The miss path of [`Self::acquire`], out of line so the hit path stays small.
    #[inline(never)]
    fn acquire_fresh(&self, bytes: usize, class: usize) -> Result<Lease<M>, PoolError> {
        let shared = &*self.shared;
        let block = self.allocate_fresh(class)?;
        let size = shared.memory.block_size(&block);
        let mut locked = shared.lock();
        locked.misses += 1;
        locked.account(bytes, size);
        drop(locked);
        Ok(Lease::new(block, bytes, size, Arc::clone(&self.shared)))
    }

    /// Makes a fresh block; on failure frees the cache and retries once (a reclaim).
    /// A request the memory refuses as too large is not retried: freeing the cache
    /// cannot make it fit.
    fn allocate_fresh(&self, class: usize) -> Result<M::Block, PoolError> {
        let shared = &*self.shared;
        match shared.memory.allocate(class) {
            Ok(block) => Ok(block),
            Err(first @ PoolError::SizeTooLarge { .. }) => Err(first),
            Err(first) => {
                if self.trim() == 0 {
                    return Err(first);
                }
                shared.lock().reclaims += 1;
                shared.memory.allocate(class)
            }
        }
    }

    /// Frees every cached block; returns how many bytes were freed.
    pub fn trim(&self) -> usize {
        let drained = {
            let mut locked = self.shared.lock();
            let bytes = locked.free.bytes();
            (locked.free.drain(), bytes)
        };
        drained.1 // the blocks in drained.0 drop here, outside the lock
    }

    /// Frees the cache and checks that no lease is live.
    ///
    /// Returns [`PoolError::Leaked`] with the live leases and their bytes otherwise.
    pub fn close(&self) -> Result<(), PoolError> {
        self.trim();
        let locked = self.shared.lock();
        let (leases, bytes) = (locked.outstanding, locked.outstanding_bytes);
        drop(locked);
        if leases == 0 {
            Ok(())
        } else {
            Err(PoolError::Leaked { leases, bytes })
        }
    }

    /// Live leases now.
    pub fn outstanding(&self) -> usize {
        self.shared.lock().outstanding
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> PoolStats {
        let locked = self.shared.lock();
        PoolStats {
            hits: locked.hits,
            misses: locked.misses,
            reclaims: locked.reclaims,
            evictions: locked.evictions,
            cached_blocks: locked.free.blocks(),
            cached_bytes: locked.free.bytes(),
            outstanding: locked.outstanding,
            outstanding_bytes: locked.outstanding_bytes,
            peak_outstanding_bytes: locked.peak_outstanding_bytes,
            requested_bytes: locked.requested_bytes,
            handed_out_bytes: locked.handed_out_bytes,
        }
    }

    /// Restarts peak tracking from the bytes outstanding now.
    pub fn reset_peak(&self) {
        let mut locked = self.shared.lock();
        locked.peak_outstanding_bytes = locked.outstanding_bytes;
    }

    /// Whether two handles refer to the same pool.
    pub fn same_pool(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl<M: Memory> Clone for BufferPool<M> {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<M: Memory> Drop for BufferPool<M> {
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // The last handle: from now on leases free their blocks directly. Set under the
        // lock, then trimmed: a release either cached its block before (and the trim frees
        // it) or sees `closed` and frees it itself.
        let (leases, bytes) = {
            let mut locked = self.shared.lock();
            locked.closed = true;
            (locked.outstanding, locked.outstanding_bytes)
        };
        self.trim();
        if leases > 0 && cfg!(debug_assertions) {
            eprintln!(
                "tempra-pool: pool dropped with {leases} live leases holding {bytes} bytes \
                 (a leak; they are freed when they drop)"
            );
        }
    }
}

impl<M: Memory> fmt::Debug for BufferPool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("config", &self.shared.config)
            .field("stats", &self.stats())
            .finish()
    }
}
