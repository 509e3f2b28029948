//! `TokenTable`: every token's bytes in one buffer, with an open-addressing index from
//! bytes to id. One allocation for the texts, one for the index; lookups by `&[u8]`
//! allocate nothing, and each slot keeps 32 bits of its text's hash so that a probe
//! compares bytes only on a likely match (most tokenizer lookups miss).

/// Token texts and a text → id index.
#[derive(Clone, Debug)]
pub(crate) struct TokenTable {
    /// All texts back to back.
    bytes: Vec<u8>,
    /// `offsets[id]..offsets[id + 1]` is token `id`'s text.
    offsets: Vec<usize>,
    /// Slot `i` holds `hash_high << 32 | (id + 1)`, or 0 when empty. Length: a power
    /// of two.
    slots: Vec<u64>,
}

/// Why a table could not be built.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TableError {
    /// Two tokens have the same text.
    Duplicate {
        /// The earlier id.
        first: u32,
        /// The later id.
        second: u32,
    },
    /// More than `u32::MAX - 1` tokens.
    TooMany,
}

impl TokenTable {
    /// Builds the table. Empty texts are kept but not indexed (they can never match).
    pub(crate) fn new<T: AsRef<[u8]>>(tokens: &[T]) -> Result<TokenTable, TableError> {
        if tokens.len() >= u32::MAX as usize {
            return Err(TableError::TooMany);
        }
        let total: usize = tokens.iter().map(|t| t.as_ref().len()).sum();
        let mut bytes = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        offsets.push(0);
        for t in tokens {
            bytes.extend_from_slice(t.as_ref());
            offsets.push(bytes.len());
        }
        let capacity = (tokens.len() * 2).next_power_of_two().max(16);
        let mut table = TokenTable {
            bytes,
            offsets,
            slots: vec![0; capacity],
        };
        for id in 0..tokens.len() as u32 {
            let text = table.text(id);
            if text.is_empty() {
                continue;
            }
            let mask = table.slots.len() - 1;
            let h = hash(text);
            let tag = h & 0xffff_ffff_0000_0000;
            let mut i = h as usize & mask;
            loop {
                let slot = table.slots[i];
                if slot == 0 {
                    table.slots[i] = tag | u64::from(id + 1);
                    break;
                }
                let other = (slot as u32) - 1;
                if slot & 0xffff_ffff_0000_0000 == tag && table.text(other) == text {
                    return Err(TableError::Duplicate {
                        first: other,
                        second: id,
                    });
                }
                i = (i + 1) & mask;
            }
        }
        Ok(table)
    }

    /// The number of tokens.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Token `id`'s text. Panics on an out-of-range id: callers check ids first.
    pub(crate) fn text(&self, id: u32) -> &[u8] {
        let id = id as usize;
        &self.bytes[self.offsets[id]..self.offsets[id + 1]]
    }

    /// The id of the token whose text is `text`.
    #[inline]
    pub(crate) fn find(&self, text: &[u8]) -> Option<u32> {
        if text.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let h = hash(text);
        let tag = h & 0xffff_ffff_0000_0000;
        let mut i = h as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if slot & 0xffff_ffff_0000_0000 == tag {
                let id = (slot as u32) - 1;
                if self.text(id) == text {
                    return Some(id);
                }
            }
            i = (i + 1) & mask;
        }
    }
}

/// A fast non-cryptographic hash of a short byte string (FxHash-style word mixing with
/// a final avalanche, so that the low bits used for the slot index are well mixed).
#[inline]
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    let n = rest.len();
    if n > 0 {
        // The tail without a copy through memory (which stalls store forwarding): two
        // overlapping 4-byte reads, or first/middle/last byte.
        let w = if n >= 4 {
            let a = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let b = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
            (u64::from(a) << 32) | u64::from(b)
        } else {
            (u64::from(rest[0]) << 16) | (u64::from(rest[n / 2]) << 8) | u64::from(rest[n - 1])
        };
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    // splitmix64 finalizer
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_and_duplicates() {
        let t = TokenTable::new(&["a", "bc", "", "▁the"]).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.find(b"bc"), Some(1));
        assert_eq!(t.find("▁the".as_bytes()), Some(3));
        assert_eq!(t.find(b""), None);
        assert_eq!(t.find(b"zz"), None);
        assert_eq!(t.text(2), b"");
        assert_eq!(
            TokenTable::new(&["x", "y", "x"]).unwrap_err(),
            TableError::Duplicate {
                first: 0,
                second: 2
            }
        );
    }

    #[test]
    fn many_tokens() {
        let tokens: Vec<String> = (0..50_000).map(|i| format!("tok{i}")).collect();
        let t = TokenTable::new(&tokens).unwrap();
        for (i, tok) in tokens.iter().enumerate() {
            assert_eq!(t.find(tok.as_bytes()), Some(i as u32));
        }
    }
}
