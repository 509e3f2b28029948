//! The cache of released blocks, ordered by size, LIFO within a size.

use std::collections::BTreeMap;

/// Released blocks keyed by their size. Within one size the block released last is
/// handed out first (it is warm in cache). Emptied sizes keep their (empty) vector so the
/// steady state of acquire/release allocates nothing.
#[derive(Debug)]
pub(crate) struct FreeList<B> {
    by_size: BTreeMap<usize, Vec<B>>,
    bytes: usize,
    blocks: usize,
}

impl<B> FreeList<B> {
    pub(crate) fn new() -> Self {
        Self { by_size: BTreeMap::new(), bytes: 0, blocks: 0 }
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
        for (&size, blocks) in self.by_size.range_mut(min..=max) {
            let found = match blocks.last() {
                Some(last) if ready(last) => blocks.pop(),
                Some(_) => blocks.iter().rposition(&ready).map(|i| blocks.remove(i)),
                None => None,
            };
            if let Some(block) = found {
                self.bytes -= size;
                self.blocks -= 1;
                return Some((block, size));
            }
        }
        None
    }

    /// Caches `block` of `size` bytes.
    #[inline]
    pub(crate) fn put(&mut self, block: B, size: usize) {
        self.by_size.entry(size).or_default().push(block);
        self.bytes += size;
        self.blocks += 1;
    }

    /// Removes every cached block (to be dropped by the caller, outside any lock).
    pub(crate) fn drain(&mut self) -> BTreeMap<usize, Vec<B>> {
        self.bytes = 0;
        self.blocks = 0;
        std::mem::take(&mut self.by_size)
    }
}

#[cfg(test)]
mod tests {
    use super::FreeList;

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
        assert_eq!(list.take(100, 300, |_| true), None, "512 is above the bound");
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
}
