//! The source of raw blocks the pool recycles.

use crate::error::PoolError;

/// A source of raw memory blocks: host slabs, GPU buffers, ...
///
/// The pool owns the policy (size classes, caching, budgets); a `Memory` only makes
/// blocks, says how big they are and whether a released block may be handed out again.
/// A block frees its memory when it is dropped (never under the pool's lock).
pub trait Memory: Send + Sync + 'static {
    /// One raw block. Dropping it frees the memory.
    type Block: Send + Sync + 'static;

    /// Makes a fresh block of at least `bytes` bytes (`bytes` is already a size class
    /// of the pool, never 0). Called without the pool's lock held.
    fn allocate(&self, bytes: usize) -> Result<Self::Block, PoolError>;

    /// The usable size of `block` in bytes.
    fn block_size(&self, block: &Self::Block) -> usize;

    /// Whether a released `block` may be handed out again now. Host memory is always
    /// ready; GPU memory is ready once the queued work that used it has completed. The
    /// pool skips cached blocks that are not ready (it never waits for one).
    ///
    /// Called with the pool's lock held: keep it cheap and do not call into the pool.
    fn is_ready(&self, block: &Self::Block) -> bool {
        let _ = block;
        true
    }
}
