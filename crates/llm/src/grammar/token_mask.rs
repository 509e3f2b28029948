//! `TokenMask`: a set of token ids as bits.

use crate::tokenizer::TokenId;

/// The tokens a constraint allows next, one bit per token id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenMask {
    bits: Vec<u64>,
    len: usize,
}

impl TokenMask {
    /// An empty mask over `len` token ids.
    pub fn new(len: usize) -> TokenMask {
        TokenMask {
            bits: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Empties the mask and sizes it for `len` token ids (keeps its buffer).
    pub fn reset(&mut self, len: usize) {
        self.bits.clear();
        self.bits.resize(len.div_ceil(64), 0);
        self.len = len;
    }

    /// Makes this mask a copy of `other` (keeps its buffer).
    pub fn copy_from(&mut self, other: &TokenMask) {
        self.bits.clear();
        self.bits.extend_from_slice(&other.bits);
        self.len = other.len;
    }

    /// Adds `id` (ids beyond the size are ignored).
    #[inline]
    pub fn insert(&mut self, id: TokenId) {
        if (id as usize) < self.len {
            self.bits[id as usize / 64] |= 1 << (id % 64);
        }
    }

    /// Whether `id` is in the mask.
    #[inline]
    pub fn contains(&self, id: TokenId) -> bool {
        (id as usize) < self.len && self.bits[id as usize / 64] & (1 << (id % 64)) != 0
    }

    /// The number of ids in the mask.
    pub fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether no id is in the mask.
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    /// The ids in the mask, ascending.
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.bits.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros();
                w &= w - 1;
                Some(i as TokenId * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_iterate_count() {
        let mut m = TokenMask::new(200);
        for id in [0, 63, 64, 199, 500] {
            m.insert(id);
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![0, 63, 64, 199]);
        assert_eq!(m.count(), 4);
        assert!(m.contains(64) && !m.contains(65) && !m.contains(500));
        let mut n = TokenMask::default();
        n.copy_from(&m);
        assert_eq!(n, m);
        n.reset(10);
        assert!(n.is_empty());
    }
}
