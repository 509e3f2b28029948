//! Host memory: 64-byte aligned, zeroed slabs from the global allocator.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::PoolError;
use crate::memory::Memory;

/// Alignment of every host block, in bytes: a cache line, and enough for any SIMD load.
pub const HOST_ALIGN: usize = 64;

/// The alignment the blocks are *allocated* with: the system allocator's natural one
/// (`2 * size_of::<usize>()`, 16 on 64-bit targets). `std`'s `alloc_zeroed` maps a layout
/// of that alignment to `calloc`, which hands out fresh pages of a large block untouched
/// (the kernel zeroes them on first use); a larger alignment goes through
/// `posix_memalign` + `memset` instead, which writes, and so commits, every page up front
/// (measured: 1.6 s and 512 MiB resident for a 512 MiB block). Blocks are therefore
/// allocated [`ALLOC_SLACK`] bytes larger at this alignment and the address rounded up to
/// [`HOST_ALIGN`].
const ALLOC_ALIGN: usize = 2 * size_of::<usize>();
/// Extra bytes allocated so that a [`HOST_ALIGN`]-aligned address fits.
const ALLOC_SLACK: usize = HOST_ALIGN - ALLOC_ALIGN;

/// Host memory from the global allocator. Fresh blocks are zeroed (`alloc_zeroed` through
/// `calloc`, so large blocks still commit their pages lazily) and nothing ever reads
/// uninitialised memory.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostMemory;

/// One host slab: `size` bytes at a 64-byte aligned address.
#[derive(Debug)]
pub struct HostBlock {
    /// The first usable byte, 64-byte aligned.
    ptr: NonNull<u8>,
    size: usize,
    /// How far `ptr` lies past the allocation's start (at most `ALLOC_SLACK`).
    offset: usize,
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
        // SAFETY: `HostMemory::allocate` allocated `size + ALLOC_SLACK` bytes at
        // `ALLOC_ALIGN` (the layout was validated there) and set `ptr` `offset` bytes past
        // the start; the allocation is freed only here.
        unsafe {
            alloc::dealloc(
                self.ptr.as_ptr().sub(self.offset),
                Layout::from_size_align_unchecked(self.size + ALLOC_SLACK, ALLOC_ALIGN),
            )
        }
    }
}

impl Memory for HostMemory {
    type Block = HostBlock;

    fn allocate(&self, bytes: usize) -> Result<HostBlock, PoolError> {
        let size = bytes.max(1);
        let layout = size
            .checked_add(ALLOC_SLACK)
            .and_then(|total| Layout::from_size_align(total, ALLOC_ALIGN).ok())
            .ok_or(PoolError::SizeTooLarge { bytes })?;
        // SAFETY: layout has a non-zero size.
        let base = unsafe { alloc::alloc_zeroed(layout) };
        let Some(base) = NonNull::new(base) else {
            return Err(PoolError::AllocationFailed {
                bytes: size,
                reason: "the global allocator returned null".into(),
            });
        };
        // `base` is ALLOC_ALIGN-aligned, so the next HOST_ALIGN boundary is at most
        // ALLOC_SLACK bytes on.
        let offset = base.addr().get().wrapping_neg() & (HOST_ALIGN - 1);
        debug_assert!(offset <= ALLOC_SLACK);
        // SAFETY: offset <= ALLOC_SLACK, so `ptr..ptr + size` lies within the allocation
        // of `size + ALLOC_SLACK` bytes.
        let ptr = unsafe { base.add(offset) };
        Ok(HostBlock { ptr, size, offset })
    }

    fn block_size(&self, block: &HostBlock) -> usize {
        block.size
    }
}
