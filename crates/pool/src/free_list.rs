//! The cache of released blocks, ordered by size, LIFO within a size.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

/// How many emptied sizes may keep their (empty) vector before they are dropped.
pub(crate) const MAX_EMPTY_SIZES: usize = 64;

/// Released blocks keyed by their size. Within one size the block released last is
/// handed out first (it is warm in cache).
///
/// Emptied sizes keep their (empty) vector so the steady state of acquire/release
/// allocates nothing, but at most [`MAX_EMPTY_SIZES`] of them: a workload that touches
/// many distinct sizes over time (large classes are 4 KiB apart) would otherwise grow the
/// map without bound, and every `take` walks the empty entries in its range.
#[derive(Debug)]
pub(crate) struct FreeList<B> {
    by_size: BTreeMap<usize, Vec<B>>,
    bytes: usize,
    blocks: usize,
    /// Entries of `by_size` whose vector is empty.
    empty_sizes: usize,
}

impl<B> FreeList<B> {
    pub(crate) fn new() -> Self {
        Self {
            by_size: BTreeMap::new(),
            bytes: 0,
            blocks: 0,
            empty_sizes: 0,
        }
    }

    /// Sizes with an entry (cached blocks or a kept empty vector).
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> usize {
        self.by_size.len()
    }

    /// Cached bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Cached blocks.
    pub(crate) fn blocks(&self) -> usize {
        self.blocks
    }

    /// Takes the smallest cached block of size in `min..=max` that `ready` accepts; the
    /// most recently released one among blocks of that size.
    #[inline]
    pub(crate) fn take(
        &mut self,
        min: usize,
        max: usize,
        ready: impl Fn(&B) -> bool,
    ) -> Option<(B, usize)> {
        // The common case first: a ready block of exactly `min` bytes (the smallest size
        // that can fit). A point lookup is cheaper than a range walk (the walk's setup
        // was a noticeable share of the hit path).
        if let Some(blocks) = self.by_size.get_mut(&min)
            && let Some(block) = Self::take_ready(blocks, &ready)
        {
            let emptied = blocks.is_empty();
            return Some(self.taken(block, min, emptied));
        }
        let mut taken = None;
        for (&size, blocks) in self.by_size.range_mut(min..=max) {
            if let Some(block) = Self::take_ready(blocks, &ready) {
                taken = Some((block, size, blocks.is_empty()));
                break;
            }
        }
        let (block, size, emptied) = taken?;
        Some(self.taken(block, size, emptied))
    }

    /// The last ready block of one size (LIFO), removed from `blocks`.
    #[inline]
    fn take_ready(blocks: &mut Vec<B>, ready: &impl Fn(&B) -> bool) -> Option<B> {
        match blocks.last() {
            Some(last) if ready(last) => blocks.pop(),
            Some(_) => blocks.iter().rposition(ready).map(|i| blocks.remove(i)),
            None => None,
        }
    }

    /// Accounts for a block of `size` bytes taken out; `emptied`: its size has no block
    /// left.
    #[inline]
    fn taken(&mut self, block: B, size: usize, emptied: bool) -> (B, usize) {
        self.bytes -= size;
        self.blocks -= 1;
        if emptied {
            self.empty_sizes += 1;
            if self.empty_sizes > MAX_EMPTY_SIZES {
                self.drop_empty_sizes();
            }
        }
        (block, size)
    }

    /// Drops every empty vector (rare: amortised over `MAX_EMPTY_SIZES` emptied sizes).
    #[cold]
    fn drop_empty_sizes(&mut self) {
        self.by_size.retain(|_, blocks| !blocks.is_empty());
        self.empty_sizes = 0;
    }

    /// Caches `block` of `size` bytes.
    #[inline]
    pub(crate) fn put(&mut self, block: B, size: usize) {
        match self.by_size.entry(size) {
            Entry::Occupied(mut entry) => {
                let blocks = entry.get_mut();
                if blocks.is_empty() {
                    self.empty_sizes -= 1;
                }
                blocks.push(block);
            }
            Entry::Vacant(entry) => {
                entry.insert(vec![block]);
            }
        }
        self.bytes += size;
        self.blocks += 1;
    }

    /// Removes every cached block (to be dropped by the caller, outside any lock).
    pub(crate) fn drain(&mut self) -> BTreeMap<usize, Vec<B>> {
        self.bytes = 0;
        self.blocks = 0;
        self.empty_sizes = 0;
        std::mem::take(&mut self.by_size)
    }
}

#[cfg(test)]
mod tests {
    use super::{FreeList, MAX_EMPTY_SIZES};

    #[test]
    fn takes_smallest_fitting_then_lifo() {
        let mut list = FreeList::new();
        list.put("a-256", 256);
        list.put("b-128", 128);
        list.put("c-128", 128);
        list.put("d-512", 512);
        assert_eq!(list.take(100, 1000, |_| true), Some(("c-128", 128)));
        assert_eq!(list.take(100, 1000, |_| true), Some(("b-128", 128)));
        assert_eq!(list.take(100, 1000, |_| true), Some(("a-256", 256)));
        assert_eq!(
            list.take(100, 300, |_| true),
            None,
            "512 is above the bound"
        );
        assert_eq!(list.bytes(), 512);
        assert_eq!(list.blocks(), 1);
    }

    #[test]
    fn skips_blocks_that_are_not_ready() {
        let mut list = FreeList::new();
        list.put(("ready", true), 64);
        list.put(("busy", false), 64);
        assert_eq!(list.take(64, 64, |b| b.1), Some((("ready", true), 64)));
        assert_eq!(list.take(64, 64, |b| b.1), None);
        assert_eq!(list.blocks(), 1);
    }

    #[test]
    fn empty_sizes_stay_bounded() {
        let mut list = FreeList::new();
        // Many distinct large sizes, each cached and taken once: the map keeps at most
        // MAX_EMPTY_SIZES empty entries, not one per size ever seen.
        for i in 1..=10_000usize {
            let size = (1 << 20) + i * 4096;
            list.put(i, size);
            assert_eq!(list.take(size, 2 * size, |_| true), Some((i, size)));
            assert!(
                list.sizes() <= MAX_EMPTY_SIZES + 1,
                "{} sizes",
                list.sizes()
            );
        }
        // The kept empty entries are reused without disturbing the accounting.
        list.put(1, 4096);
        list.put(2, 4096);
        assert_eq!((list.blocks(), list.bytes()), (2, 8192));
        assert_eq!(list.take(4096, 4096, |_| true), Some((2, 4096)));
        assert_eq!(list.take(4096, 4096, |_| true), Some((1, 4096)));
        assert_eq!(list.take(0, usize::MAX, |_| true), None);
        assert_eq!((list.blocks(), list.bytes()), (0, 0));
    }
}
