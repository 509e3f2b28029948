//! The seam between the product kernels (`gemm`, `quantized`) and whatever runs their
//! tasks: a `parallel_for` over item ranges.

use std::ops::Range;

/// Runs `f` over disjoint ranges covering `0..n_items`, in parallel where worthwhile.
pub(crate) trait Parallel: Sync {
    /// How many threads tasks may run on (1: everything runs on the caller).
    fn threads(&self) -> usize;

    /// Calls `f` on disjoint, contiguous ranges that together cover `0..n_items`, each of
    /// at least `min_items` items (except a last short one), and returns when all calls
    /// have returned.
    fn parallel_for(&self, n_items: usize, min_items: usize, f: &(dyn Fn(Range<usize>) + Sync));
}

/// Runs everything on the calling thread (the probes time single-threaded kernels).
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Serial;

#[cfg(test)]
impl Parallel for Serial {
    fn threads(&self) -> usize {
        1
    }

    fn parallel_for(&self, n_items: usize, _min_items: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
        if n_items > 0 {
            f(0..n_items);
        }
    }
}
