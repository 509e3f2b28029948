//! A test `Memory` shared by the integration tests: blocks carry an id, a readiness flag
//! and a live-block counter, and an optional hook runs at the start of every allocation
//! (to fail it, or to block it).
#![allow(dead_code)] // each test binary uses a part of this module

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tempra_pool::{Lease, Memory, PoolError};

/// A fake block: no memory behind it, just identity and bookkeeping.
pub(crate) struct TestBlock {
    /// Allocation order, from 0.
    pub(crate) id: usize,
    /// The size it was made with.
    pub(crate) size: usize,
    /// What `is_ready` reports (a GPU fence, in a real backend).
    pub(crate) ready: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    on_drop: Option<Arc<DropHook>>,
}

impl std::fmt::Debug for TestBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBlock")
            .field("id", &self.id)
            .field("size", &self.size)
            .finish()
    }
}

impl Drop for TestBlock {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        if let Some(hook) = &self.on_drop {
            hook(self);
        }
    }
}

/// Runs at the start of `allocate` with the requested size; an error fails it.
pub(crate) type AllocHook = dyn Fn(usize) -> Result<(), PoolError> + Send + Sync;
/// Runs when a block is freed.
pub(crate) type DropHook = dyn Fn(&TestBlock) + Send + Sync;

/// Counts live blocks; see the module docs.
#[derive(Default)]
pub(crate) struct TestMemory {
    live: Arc<AtomicUsize>,
    allocations: AtomicUsize,
    on_allocate: Option<Box<AllocHook>>,
    on_drop: Option<Arc<DropHook>>,
}

impl TestMemory {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A memory that runs `hook` at the start of every allocation.
    pub(crate) fn with_hook(
        hook: impl Fn(usize) -> Result<(), PoolError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            on_allocate: Some(Box::new(hook)),
            ..Self::default()
        }
    }

    /// A memory whose blocks run `hook` when they are freed.
    pub(crate) fn with_drop_hook(hook: impl Fn(&TestBlock) + Send + Sync + 'static) -> Self {
        Self {
            on_drop: Some(Arc::new(hook)),
            ..Self::default()
        }
    }

    /// Blocks made and not yet freed.
    pub(crate) fn live_blocks(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// The live-block counter itself, to read after the pool is gone.
    pub(crate) fn live_counter(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.live)
    }

    /// Successful allocations so far.
    pub(crate) fn allocations(&self) -> usize {
        self.allocations.load(Ordering::SeqCst)
    }
}

impl Memory for TestMemory {
    type Block = TestBlock;

    fn allocate(&self, bytes: usize) -> Result<TestBlock, PoolError> {
        assert!(bytes > 0, "the pool passes size classes, never 0");
        if let Some(hook) = &self.on_allocate {
            hook(bytes)?;
        }
        let id = self.allocations.fetch_add(1, Ordering::SeqCst);
        self.live.fetch_add(1, Ordering::SeqCst);
        Ok(TestBlock {
            id,
            size: bytes,
            ready: Arc::new(AtomicBool::new(true)),
            live: Arc::clone(&self.live),
            on_drop: self.on_drop.clone(),
        })
    }

    fn block_size(&self, block: &TestBlock) -> usize {
        block.size
    }

    fn is_ready(&self, block: &TestBlock) -> bool {
        block.ready.load(Ordering::SeqCst)
    }
}

/// The id of the block behind `lease`.
pub(crate) fn id(lease: &Lease<TestMemory>) -> usize {
    lease.block().id
}

/// An allocation failure as a memory source would report it.
pub(crate) fn out_of_memory(bytes: usize) -> PoolError {
    PoolError::AllocationFailed {
        bytes,
        reason: "test: out of memory".into(),
    }
}
