//! The seam between the product kernels (`gemm`, `quantized`) and whatever runs their
//! tasks: a `parallel_for` over item ranges.

use std::ops::Range;
use std::sync::Mutex;

use tempra_tensor::{Result, TensorError};

/// Runs `f` over disjoint ranges covering `0..n_items`, in parallel where worthwhile.
pub(crate) trait Parallel: Sync {
    /// How many threads tasks may run on (1: everything runs on the caller).
    fn threads(&self) -> usize;

    /// Calls `f` on disjoint, contiguous ranges that together cover `0..n_items`, each of
    /// at least `min_items` items (except a last short one), and returns when all calls
    /// have returned.
    fn parallel_for(&self, n_items: usize, min_items: usize, f: &(dyn Fn(Range<usize>) + Sync));
}

/// The first error any task of one parallel call reported (tasks cannot return one).
#[derive(Debug, Default)]
pub(crate) struct TaskErrors(Mutex<Option<TensorError>>);

impl TaskErrors {
    /// Keeps `result`'s error, if any.
    pub(crate) fn record(&self, result: Result<()>) {
        if let Err(e) = result {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        }
    }

    /// The call's result once every task has ended.
    pub(crate) fn finish(self) -> Result<()> {
        match self.0.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A pointer into one buffer that the tasks of one parallel call write, each a disjoint
/// part of it (the creator's promise, restated at each dereference).
#[derive(Clone, Copy)]
pub(crate) struct DisjointWrites<T>(*mut T);
// SAFETY: the tasks of the call write disjoint parts of the buffer (of `T: Send`
// elements), and the call returns only after every task has ended, so no two threads
// touch the same element.
unsafe impl<T: Send> Send for DisjointWrites<T> {}
// SAFETY: as above; sharing the pointer only lets each task build its own disjoint part.
unsafe impl<T: Send> Sync for DisjointWrites<T> {}

impl<T> DisjointWrites<T> {
    /// Shares `buffer`'s elements with the tasks of one parallel call.
    pub(crate) fn new(buffer: &mut [T]) -> Self {
        Self(buffer.as_mut_ptr())
    }

    /// The buffer's first element (a method, so closures capture the whole `Sync`
    /// wrapper).
    pub(crate) fn ptr(&self) -> *mut T {
        self.0
    }

    /// The pointer `count` elements on, into the same buffer.
    ///
    /// # Safety
    ///
    /// The result lies inside the buffer (or one past its end).
    pub(crate) unsafe fn add(self, count: usize) -> Self {
        // SAFETY: in bounds by the caller's contract.
        Self(unsafe { self.0.add(count) })
    }
}

impl<T> std::fmt::Debug for DisjointWrites<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DisjointWrites({:p})", self.0)
    }
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
