//! The crate's error type.

/// Everything the pool can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// The request cannot be represented as an allocation (it overflows once rounded
    /// to its size class or exceeds `isize::MAX`).
    #[error("cannot allocate {bytes} bytes: size too large")]
    SizeTooLarge {
        /// The size asked for.
        bytes: usize,
    },
    /// The memory source could not make a block, even after the cache was trimmed.
    #[error("allocation of {bytes} bytes failed: {reason}")]
    AllocationFailed {
        /// The rounded size that failed.
        bytes: usize,
        /// What the memory source reported.
        reason: String,
    },
    /// Leases were still live when the pool was closed.
    #[error("pool closed with {leases} live leases holding {bytes} bytes")]
    Leaked {
        /// Live leases.
        leases: usize,
        /// Bytes those leases hold (their block sizes).
        bytes: usize,
    },
}
