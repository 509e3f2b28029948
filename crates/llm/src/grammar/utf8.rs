//! Code point ranges as UTF-8 byte sequences: a set of characters becomes alternatives
//! of byte-range sequences that match exactly the UTF-8 encodings of its characters
//! (surrogates excluded), so the grammar can run on bytes.

use std::ops::RangeInclusive;

/// The largest Unicode scalar value.
pub(crate) const MAX_CHAR: u32 = 0x10_FFFF;

/// One UTF-8 encoding pattern: a byte range per position.
pub(crate) type ByteSeq = Vec<RangeInclusive<u8>>;

/// The ranges of `ranges` (any order, may overlap), complemented when `negated`,
/// merged, sorted and without surrogates.
pub(crate) fn normalize(ranges: &[RangeInclusive<u32>], negated: bool) -> Vec<RangeInclusive<u32>> {
    let mut sorted: Vec<(u32, u32)> = ranges
        .iter()
        .map(|r| (*r.start(), (*r.end()).min(MAX_CHAR)))
        .filter(|(a, b)| a <= b)
        .collect();
    sorted.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(sorted.len());
    for (a, b) in sorted {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    if negated {
        let mut complement = Vec::with_capacity(merged.len() + 1);
        let mut next = 0u32;
        for (a, b) in &merged {
            if *a > next {
                complement.push((next, a - 1));
            }
            next = b.saturating_add(1);
        }
        if next <= MAX_CHAR {
            complement.push((next, MAX_CHAR));
        }
        merged = complement;
    }
    let mut out = Vec::with_capacity(merged.len() + 1);
    for (a, b) in merged {
        // Cut out the surrogates D800..DFFF: they have no UTF-8 encoding.
        if a < 0xD800 {
            out.push(a..=b.min(0xD7FF));
        }
        if b > 0xDFFF {
            out.push(a.max(0xE000)..=b);
        }
    }
    out
}

fn encode(c: u32, out: &mut [u8; 4]) -> usize {
    char::from_u32(c).map_or(0, |ch| ch.encode_utf8(out).len())
}

/// The UTF-8 byte-range sequences of the scalar values in `range` (no surrogates):
/// disjoint, each matching only encodings of values in the range.
pub(crate) fn sequences(range: RangeInclusive<u32>, out: &mut Vec<ByteSeq>) {
    let mut work = vec![(*range.start(), *range.end())];
    while let Some((start, end)) = work.pop() {
        if start > end {
            continue;
        }
        // Split at the encoded-length boundaries.
        if let Some(&edge) = [0x7F, 0x7FF, 0xFFFF]
            .iter()
            .find(|&&edge| start <= edge && end > edge)
        {
            work.push((edge + 1, end));
            work.push((start, edge));
            continue;
        }
        let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
        let n = encode(start, &mut a);
        if n == 0 || encode(end, &mut b) != n {
            continue;
        }
        // Split until every position below the first differing one spans its whole
        // continuation range.
        let mut split = None;
        for i in 1..n {
            let max = (1u32 << (6 * i)) - 1;
            if start & !max != end & !max {
                if start & max != 0 {
                    split = Some(((start, start | max), (start | max) + 1, end));
                    break;
                }
                if end & max != max {
                    split = Some(((start, (end & !max) - 1), end & !max, end));
                    break;
                }
            }
        }
        if let Some(((a0, a1), b0, b1)) = split {
            work.push((b0, b1));
            work.push((a0, a1));
            continue;
        }
        out.push((0..n).map(|i| a[i]..=b[i]).collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(seqs: &[ByteSeq], bytes: &[u8]) -> bool {
        seqs.iter()
            .any(|s| s.len() == bytes.len() && s.iter().zip(bytes).all(|(r, b)| r.contains(b)))
    }

    #[test]
    fn sequences_match_exactly_the_range() {
        for (lo, hi) in [
            (0u32, 0x10FFFF),
            (0x41, 0x5A),
            (0x7F, 0x800),
            (0x3B1, 0x2603),
            (0xFFFF, 0x10000),
            (0x1F600, 0x1F64F),
            (0xE000, 0xFFFF),
        ] {
            let mut seqs = Vec::new();
            for r in normalize(&[lo..=hi], false) {
                sequences(r, &mut seqs);
            }
            let mut buf = [0u8; 4];
            let step = if hi - lo > 70_000 { 7 } else { 1 };
            let mut c = lo.saturating_sub(300);
            while c <= (hi + 300).min(MAX_CHAR) {
                if let Some(ch) = char::from_u32(c) {
                    let bytes = ch.encode_utf8(&mut buf).as_bytes();
                    assert_eq!(
                        matches(&seqs, bytes),
                        (lo..=hi).contains(&c),
                        "U+{c:04X} in {lo:X}..={hi:X}"
                    );
                }
                c += step;
            }
            // Never an invalid sequence: a lone continuation byte or a surrogate.
            assert!(!matches(&seqs, &[0x80]));
            assert!(!matches(&seqs, &[0xED, 0xA0, 0x80]));
        }
    }

    #[test]
    fn normalize_merges_negates_and_drops_surrogates() {
        assert_eq!(
            normalize(&[5..=9, 1..=4, 20..=20], false),
            vec![1..=9, 20..=20]
        );
        assert_eq!(
            normalize(&[0x22..=0x22, 0x5C..=0x5C], true),
            vec![0..=0x21, 0x23..=0x5B, 0x5D..=0xD7FF, 0xE000..=MAX_CHAR]
        );
    }
}
