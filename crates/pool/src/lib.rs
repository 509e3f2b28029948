//! tempra-pool: a size-bucketed buffer pool that recycles transient tensor memory.
//!
//! See `README.md` for the policy, the [`Memory`] contract and measured figures.
//!
//! ```
//! use tempra_pool::BufferPool;
//!
//! let pool = BufferPool::host();
//! let mut lease = pool.acquire(1024 * size_of::<f32>())?; // 4 KiB class, zeroed
//! lease.as_mut_slice::<f32>().fill(1.5);
//! let addr = lease.as_ptr();
//! drop(lease); // back to the pool
//! let again = pool.acquire(3000)?; // the same 4 KiB class: the same block
//! assert_eq!(again.as_ptr(), addr);
//! assert_eq!((pool.stats().hits, pool.stats().misses), (1, 1));
//! drop(again);
//! pool.close()?; // Err(PoolError::Leaked { .. }) if a lease were still live
//! # Ok::<(), tempra_pool::PoolError>(())
//! ```
//!
//! Policy:
//! - requests round to size classes ([`size_class`]): powers of two up to 32 KiB, then
//!   multiples of 4 KiB;
//! - the cache is ordered by size; `acquire` takes the smallest ready cached block that
//!   fits, and the block released last among those of one size (LIFO: warm in cache);
//! - bounded waste: a request of 1 MiB or more never receives a block more than twice its
//!   class (4x below that);
//! - one byte budget ([`PoolConfig::max_cached_bytes`], 1 GiB by default): a released
//!   block that would push the cache over it is freed instead;
//! - the lock is never held while a fresh block is made or a block is freed;
//! - a failed allocation frees the cache and is retried once (a reclaim);
//! - a block is handed out again only when its [`Memory`] says it is ready;
//! - live leases are counted; [`BufferPool::close`] reports a leak as an error.

mod error;
mod free_list;
mod host;
mod lease;
mod memory;
mod pool;
pub mod size_class;
mod stats;

pub use error::PoolError;
pub use host::{HOST_ALIGN, HUGE_PAGE, HostBlock, HostMemory};
pub use lease::Lease;
pub use memory::Memory;
pub use pool::{BufferPool, DEFAULT_MAX_CACHED_BYTES, HostPool, PoolConfig};
pub use size_class::size_class;
pub use stats::PoolStats;

/// A lease of host memory.
pub type HostLease = Lease<HostMemory>;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
