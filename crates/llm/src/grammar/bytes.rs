//! `ByteSet`: a set of byte values as 256 bits.

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    /// No byte.
    pub(crate) const EMPTY: ByteSet = ByteSet([0; 4]);

    /// The bytes `lo..=hi`.
    pub(crate) fn range(lo: u8, hi: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        for b in lo..=hi {
            s.insert(b);
        }
        s
    }

    /// Adds `b`.
    #[inline]
    pub(crate) fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }

    /// Whether `b` is in the set.
    #[inline]
    pub(crate) fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }

    /// Adds every byte of `other`.
    pub(crate) fn union_with(&mut self, other: &ByteSet) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    /// Whether the sets share a byte.
    pub(crate) fn intersects(&self, other: &ByteSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }

    /// The number of bytes in the set.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}
