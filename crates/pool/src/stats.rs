//! Counters that make reuse and waste visible.

/// A snapshot of a pool's counters, from [`crate::BufferPool::stats`].
///
/// `hits + misses` is the number of successful acquires; `handed_out_bytes -
/// requested_bytes` is the total rounding and reuse slack handed out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Acquires served from a cached block.
    pub hits: u64,
    /// Acquires that had to make a fresh block.
    pub misses: u64,
    /// Failed allocations retried after freeing every cached block.
    pub reclaims: u64,
    /// Released blocks freed instead of cached because of the byte budget.
    pub evictions: u64,
    /// Blocks sitting in the cache now.
    pub cached_blocks: usize,
    /// Bytes sitting in the cache now.
    pub cached_bytes: usize,
    /// Live leases now.
    pub outstanding: usize,
    /// Bytes held by live leases now (their block sizes).
    pub outstanding_bytes: usize,
    /// The most bytes live leases ever held at once (since creation or the last
    /// [`crate::BufferPool::reset_peak`]).
    pub peak_outstanding_bytes: usize,
    /// Total bytes asked for by successful acquires.
    pub requested_bytes: u64,
    /// Total bytes of the blocks handed out for them.
    pub handed_out_bytes: u64,
}

impl PoolStats {
    /// Fraction of acquires served from the cache (0 when there were none).
    pub fn hit_rate(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        }
    }
}
