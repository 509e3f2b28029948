//! `Merges`: a byte-level BPE vocabulary's ranked merges, as a map from a pair of token
//! ids to the merge's rank and the id of the merged token.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::token_table::TokenTable;

/// Ranked merges: `(left, right) -> (rank, merged)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Merges {
    map: HashMap<u64, (u32, u32), BuildHasherDefault<PairHasher>>,
}

/// A merge line that could not be parsed.
#[derive(Debug)]
pub(crate) struct MalformedMerge {
    /// The merge's index.
    pub(crate) index: usize,
}

impl Merges {
    /// Parses GGUF merges (`"left right"`, split at the first space after the first
    /// byte, as llama.cpp does). A merge whose parts or result are not tokens can never
    /// apply and is skipped; the first of two equal merges keeps its rank.
    pub(crate) fn parse<T: AsRef<[u8]>>(
        lines: &[T],
        table: &TokenTable,
    ) -> Result<Merges, MalformedMerge> {
        let mut map = HashMap::with_capacity_and_hasher(lines.len(), BuildHasherDefault::default());
        let mut joined = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            let line = line.as_ref();
            let split = line.iter().skip(1).position(|&b| b == b' ').map(|p| p + 1);
            let Some(split) = split else {
                return Err(MalformedMerge { index });
            };
            let (left, right) = (&line[..split], &line[split + 1..]);
            let (Some(l), Some(r)) = (table.find(left), table.find(right)) else {
                continue;
            };
            joined.clear();
            joined.extend_from_slice(left);
            joined.extend_from_slice(right);
            let Some(merged) = table.find(&joined) else {
                continue;
            };
            map.entry(key(l, r)).or_insert((index as u32, merged));
        }
        Ok(Merges { map })
    }

    /// The rank and result of merging `left` with `right`.
    #[inline]
    pub(crate) fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        self.map.get(&key(left, right)).copied()
    }

    /// The usable merges as `(left, right)` id pairs, highest priority first.
    pub(crate) fn ranked(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32, u32)> = self
            .map
            .iter()
            .map(|(&k, &(rank, _))| (rank, (k >> 32) as u32, k as u32))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, l, r)| (l, r)).collect()
    }

    /// The number of usable merges.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[inline]
fn key(left: u32, right: u32) -> u64 {
    ((left as u64) << 32) | right as u64
}

/// A hasher for the `u64` pair keys: one multiply and a fold.
#[derive(Default)]
pub(crate) struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        let h = (v ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_ranks_and_skips() {
        let table = TokenTable::new(&["a", "b", "ab", "c", "abc"]).unwrap();
        let m = Merges::parse(&["a b", "ab c", "a c", "a b"], &table).unwrap();
        assert_eq!(m.get(0, 1), Some((0, 2)));
        assert_eq!(m.get(2, 3), Some((1, 4)));
        assert_eq!(m.get(0, 3), None); // "ac" is not a token
        assert_eq!(m.len(), 2);
        assert_eq!(Merges::parse(&["ab"], &table).unwrap_err().index, 0);
    }
}
