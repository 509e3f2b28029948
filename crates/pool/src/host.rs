//! Host memory: 64-byte aligned, zeroed slabs from the global allocator.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::PoolError;
use crate::memory::Memory;

/// Alignment of every host block, in bytes: a cache line, and enough for any SIMD load.
pub const HOST_ALIGN: usize = 64;

/// Host memory from the global allocator. Fresh blocks are zeroed (`alloc_zeroed`, so
/// large blocks still commit their pages lazily) and nothing ever reads uninitialised
/// memory.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostMemory;

/// One host slab: `size` bytes at a 64-byte aligned address.
#[derive(Debug)]
pub struct HostBlock {
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: a HostBlock uniquely owns its allocation (like a Box<[u8]>); access to the
// bytes goes through `&`/`&mut` borrows of the lease that holds it.
unsafe impl Send for HostBlock {}
// SAFETY: shared references only expose the address and size; reading the bytes through
// `&self` is a shared borrow, which is sound from several threads.
unsafe impl Sync for HostBlock {}

impl HostBlock {
    /// The block's first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The block's first byte, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The block's size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// All bytes of the block (zeroed when it was made).
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes(self.size)
    }

    /// All bytes of the block, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.bytes_mut(self.size)
    }

    /// The first `len` bytes of the block (`len` ≤ size).
    pub(crate) fn bytes(&self, len: usize) -> &[u8] {
        let len = len.min(self.size);
        // SAFETY: ptr is valid for `size` initialised (zeroed at allocation) bytes, owned
        // by this block for as long as the borrow of `self` lasts.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    /// The first `len` bytes of the block, writable (`len` ≤ size).
    pub(crate) fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        let len = len.min(self.size);
        // SAFETY: as in `bytes`, and `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), len) }
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        // SAFETY: the block was allocated by `HostMemory::allocate` with exactly this
        // size and alignment (the layout was validated there), and is freed only here.
        unsafe {
            alloc::dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.size, HOST_ALIGN),
            )
        }
    }
}

impl Memory for HostMemory {
    type Block = HostBlock;

    fn allocate(&self, bytes: usize) -> Result<HostBlock, PoolError> {
        let size = bytes.max(1);
        let layout = Layout::from_size_align(size, HOST_ALIGN)
            .map_err(|_| PoolError::SizeTooLarge { bytes })?;
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        match NonNull::new(ptr) {
            Some(ptr) => Ok(HostBlock { ptr, size }),
            None => Err(PoolError::AllocationFailed {
                bytes: size,
                reason: "the global allocator returned null".into(),
            }),
        }
    }

    fn block_size(&self, block: &HostBlock) -> usize {
        block.size
    }
}
