//! `Lease`: a block on loan from a pool, returned when dropped.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::host::{HOST_ALIGN, HostMemory};
use crate::memory::Memory;
use crate::pool::Shared;

/// A block on loan from a [`crate::BufferPool`]. Dropping it returns the block to the
/// pool (or frees it, when the pool is closed or over budget).
///
/// A lease stays valid if every pool handle is dropped before it.
pub struct Lease<M: Memory> {
    block: ManuallyDrop<M::Block>,
    len: usize,
    size: usize,
    shared: Arc<Shared<M>>,
}

impl<M: Memory> Lease<M> {
    pub(crate) fn new(block: M::Block, len: usize, size: usize, shared: Arc<Shared<M>>) -> Self {
        Self {
            block: ManuallyDrop::new(block),
            len,
            size,
            shared,
        }
    }

    /// The bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether zero bytes were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the block behind the lease (its size class or more).
    pub fn capacity(&self) -> usize {
        self.size
    }

    /// The raw block (for backends that bind it, e.g. a GPU buffer).
    pub fn block(&self) -> &M::Block {
        &self.block
    }

    /// The raw block, writable.
    pub fn block_mut(&mut self) -> &mut M::Block {
        &mut self.block
    }

    /// The memory source of the pool this lease came from.
    pub fn memory(&self) -> &M {
        &self.shared.memory
    }
}

impl Lease<HostMemory> {
    /// The first `len()` bytes of the block.
    pub fn as_bytes(&self) -> &[u8] {
        self.block.bytes(self.len)
    }

    /// The first `len()` bytes of the block, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.block.bytes_mut(self.len)
    }

    /// The leased bytes as `len() / size_of::<T>()` values of `T` (any `Pod`: f32, f16,
    /// u8, quantized blocks, ...). Trailing bytes that do not fill a `T` are left out.
    pub fn as_slice<T: bytemuck::Pod>(&self) -> &[T] {
        const { assert!(align_of::<T>() <= HOST_ALIGN && size_of::<T>() > 0) };
        let n = self.len / size_of::<T>();
        bytemuck::cast_slice(self.block.bytes(n * size_of::<T>()))
    }

    /// The leased bytes as values of `T`, writable. See [`Self::as_slice`].
    pub fn as_mut_slice<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        const { assert!(align_of::<T>() <= HOST_ALIGN && size_of::<T>() > 0) };
        let n = self.len / size_of::<T>();
        bytemuck::cast_slice_mut(self.block.bytes_mut(n * size_of::<T>()))
    }

    /// The address of the first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.block.as_ptr()
    }
}

impl<M: Memory> Drop for Lease<M> {
    fn drop(&mut self) {
        // SAFETY: `block` is taken exactly once, here, and never touched again.
        let block = unsafe { ManuallyDrop::take(&mut self.block) };
        self.shared.release(block, self.size);
    }
}

impl<M: Memory> fmt::Debug for Lease<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("len", &self.len)
            .field("capacity", &self.size)
            .finish()
    }
}
