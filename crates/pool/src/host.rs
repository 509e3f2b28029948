//! Host memory: 64-byte aligned, zeroed slabs from the global allocator; blocks of 2 MiB
//! and more are 2 MiB aligned and, on Linux, marked for transparent huge pages.

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
/// (a large block is then all resident, and paid for in time, before its first use).
/// Blocks are therefore allocated a few bytes larger at this alignment (the slack, see
/// [`placement`]) and the address rounded up.
const ALLOC_ALIGN: usize = 2 * size_of::<usize>();

/// The size of an x86-64 (and most AArch64) transparent huge page. Blocks of at least
/// this size start on such a boundary, so that every whole 2 MiB of them can be one
/// huge page: one TLB entry instead of 512, and a page walk per 2 MiB instead of per
/// 4 KiB when a kernel streams through weights (decode reads every weight once per
/// token; decode is faster with them, see the crate README).
pub const HUGE_PAGE: usize = 2 << 20;

/// Where a block of `size` bytes starts in its allocation: the alignment its address is
/// rounded up to, and the slack allocated for that rounding. The slack pages of a large
/// block are never touched, so they cost address space, not memory.
const fn placement(size: usize) -> (usize, usize) {
    let align = if size >= HUGE_PAGE {
        HUGE_PAGE
    } else {
        HOST_ALIGN
    };
    (align, align - ALLOC_ALIGN)
}

/// Whether large blocks are marked for huge pages: yes unless the environment variable
/// `TEMPRA_HUGE_PAGES` is `0` (read once; for A/B measurements and for systems where
/// the kernel's compaction on a huge-page fault is unwelcome).
#[cfg(target_os = "linux")]
fn huge_pages_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var("TEMPRA_HUGE_PAGES").map_or(true, |v| v.trim() != "0"))
}

/// Asks the kernel to back the whole 2 MiB pages of `ptr..ptr + size` with transparent
/// huge pages (`madvise(MADV_HUGEPAGE)`; with THP in its default `madvise` mode, only
/// marked memory gets them). Advice only: on failure (no THP in this kernel) the block
/// keeps 4 KiB pages and nothing else changes.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: NonNull<u8>, size: usize) {
    let len = size & !(HUGE_PAGE - 1);
    if len == 0 || !huge_pages_wanted() {
        return;
    }
    // SAFETY: `ptr` is 2 MiB aligned (so page aligned) and `ptr..ptr + len` lies inside
    // this block's live allocation; MADV_HUGEPAGE changes no contents and no mapping,
    // only how later page faults in the range are served.
    unsafe {
        libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
    }
}

/// Huge pages are a Linux advice; other systems keep their default pages.
#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: NonNull<u8>, _size: usize) {}

/// Host memory from the global allocator. Fresh blocks are zeroed (`alloc_zeroed` through
/// `calloc`, so large blocks still commit their pages lazily) and nothing ever reads
/// uninitialised memory. Blocks of [`HUGE_PAGE`] bytes or more are aligned to it and, on
/// Linux, marked for transparent huge pages (unless `TEMPRA_HUGE_PAGES=0`).
#[derive(Debug, Default, Clone, Copy)]
pub struct HostMemory;

/// One host slab: `size` bytes at a 64-byte aligned address.
#[derive(Debug)]
pub struct HostBlock {
    /// The first usable byte, 64-byte aligned.
    ptr: NonNull<u8>,
    size: usize,
    /// How far `ptr` lies past the allocation's start (at most the slack of
    /// [`placement`]).
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
        let (_, slack) = placement(self.size);
        // SAFETY: `HostMemory::allocate` allocated `size + slack` bytes at `ALLOC_ALIGN`
        // (the layout was validated there) and set `ptr` `offset` bytes past the start;
        // the allocation is freed only here.
        unsafe {
            alloc::dealloc(
                self.ptr.as_ptr().sub(self.offset),
                Layout::from_size_align_unchecked(self.size + slack, ALLOC_ALIGN),
            )
        }
    }
}

impl Memory for HostMemory {
    type Block = HostBlock;

    fn allocate(&self, bytes: usize) -> Result<HostBlock, PoolError> {
        let size = bytes.max(1);
        let (align, slack) = placement(size);
        let layout = size
            .checked_add(slack)
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
        // `base` is ALLOC_ALIGN-aligned, so the next `align` boundary is at most `slack`
        // bytes on.
        let offset = base.addr().get().wrapping_neg() & (align - 1);
        debug_assert!(offset <= slack);
        // SAFETY: offset <= slack, so `ptr..ptr + size` lies within the allocation of
        // `size + slack` bytes.
        let ptr = unsafe { base.add(offset) };
        if align == HUGE_PAGE {
            advise_huge_pages(ptr, size);
        }
        Ok(HostBlock { ptr, size, offset })
    }

    fn block_size(&self, block: &HostBlock) -> usize {
        block.size
    }
}
