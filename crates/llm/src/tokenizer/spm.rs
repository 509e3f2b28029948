//! SentencePiece-style tokenization (llama.cpp's `llm_tokenizer_spm`): start from the
//! text's characters and repeatedly merge the adjacent pair whose concatenation is the
//! highest-scoring token (ties: leftmost); characters left that are not tokens fall
//! back to byte tokens (`<0xE2>`).
//!
//! The text is already escaped (`▁` for spaces, space prefix added). A priority queue
//! of candidate pairs drives the merges; entries made stale by an earlier merge are
//! recognised by their length and skipped. The symbol list and queue live in a scratch
//! that the caller reuses: nothing is allocated per token.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocabulary::{TokenId, Vocabulary};

/// No neighbour.
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: u32,
    len: u32,
    prev: u32,
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct Bigram {
    score: f32,
    left: u32,
    right: u32,
    len: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Reusable working memory for [`tokenize`].
#[derive(Debug, Default)]
pub(crate) struct SpmScratch {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
    /// `pairs[i]`: the score of the token symbol `i` forms with its successor.
    pairs: Vec<Option<f32>>,
}

/// Segments of at most this many characters (nearly every word) are merged by scanning
/// for the best pair, in the queue's order (highest score, then leftmost), instead of
/// through the priority queue.
const SCAN_LIMIT: usize = 24;

/// The byte length of the UTF-8 sequence a lead byte announces (1 for a stray
/// continuation byte), as llama.cpp's `unicode_len_utf8`.
pub(crate) fn utf8_len(lead: u8) -> usize {
    const LOOKUP: [u8; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(lead >> 4) as usize] as usize
}

/// SentencePiece's whitespace marker `▁` (U+2581).
const SPACE_MARK: &[u8] = "\u{2581}".as_bytes();

/// Tokenizes escaped `text`, appending ids to `out`: exactly [`tokenize`] on the whole
/// text, computed word by word.
///
/// A merge joins two adjacent symbols only if their concatenation is a token, so a
/// position where the characters on either side never sit next to each other inside
/// any token is never crossed by a merge: the text on each side evolves independently,
/// and the global highest-score-first order restricted to one side is that side's own
/// order. `▁` preceded by a character that no token has right before a `▁`
/// ([`Vocabulary::spm_mark_joiners`]) is such a position: in practice, every word
/// boundary. Splitting there keeps each priority queue small (cache-resident) instead
/// of one queue over the whole input.
pub(crate) fn tokenize_segmented(
    vocab: &Vocabulary,
    text: &[u8],
    scratch: &mut SpmScratch,
    out: &mut Vec<TokenId>,
) {
    let mut seg_start = 0;
    let mut prev_char_start = None;
    let mut pos = 0;
    while pos < text.len() {
        let len = utf8_len(text[pos]).min(text.len() - pos);
        if pos > seg_start
            && text[pos..].starts_with(SPACE_MARK)
            && let Some(prev) = prev_char_start
            && !vocab.spm_joins_mark(&text[prev..pos])
        {
            tokenize(vocab, &text[seg_start..pos], scratch, out);
            seg_start = pos;
        }
        prev_char_start = Some(pos);
        pos += len;
    }
    tokenize(vocab, &text[seg_start..], scratch, out);
}

/// Tokenizes escaped `text`, appending ids to `out`. `text` must be shorter than
/// 4 GiB (the caller splits longer input).
pub(crate) fn tokenize(
    vocab: &Vocabulary,
    text: &[u8],
    scratch: &mut SpmScratch,
    out: &mut Vec<TokenId>,
) {
    debug_assert!(text.len() < NONE as usize);
    let symbols = &mut scratch.symbols;
    let queue = &mut scratch.queue;
    symbols.clear();
    queue.clear();
    if text.is_empty() {
        return;
    }
    let mut offset = 0usize;
    while offset < text.len() {
        let len = utf8_len(text[offset]).min(text.len() - offset);
        let index = symbols.len() as u32;
        symbols.push(Symbol {
            start: offset as u32,
            len: len as u32,
            prev: if index == 0 { NONE } else { index - 1 },
            next: if offset + len == text.len() {
                NONE
            } else {
                index + 1
            },
        });
        offset += len;
    }
    if symbols.len() <= SCAN_LIMIT {
        merge_by_scan(vocab, text, symbols, &mut scratch.pairs);
    } else {
        merge_by_queue(vocab, text, symbols, queue);
    }
    let mut i = 0u32;
    while i != NONE {
        let s = symbols[i as usize];
        let piece = &text[s.start as usize..(s.start + s.len) as usize];
        match vocab.table.find(piece) {
            Some(id) => out.push(id),
            None => {
                for &b in piece {
                    if let Some(id) = vocab.byte_tokens[b as usize].or(vocab.special.unk) {
                        out.push(id);
                    }
                }
            }
        }
        i = s.next;
    }
}

/// The score of the token that symbol `i` and its successor form, if they form one.
fn pair_score(vocab: &Vocabulary, text: &[u8], symbols: &[Symbol], i: u32) -> Option<f32> {
    let s = symbols[i as usize];
    if s.next == NONE {
        return None;
    }
    let len = s.len + symbols[s.next as usize].len;
    let id = vocab
        .table
        .find(&text[s.start as usize..(s.start + len) as usize])?;
    Some(vocab.scores[id as usize])
}

/// Merges `right` (the successor of `left`) into `left`.
fn merge(symbols: &mut [Symbol], left: u32, right: u32) {
    let r = symbols[right as usize];
    symbols[left as usize].len += r.len;
    symbols[right as usize].len = 0;
    symbols[left as usize].next = r.next;
    if r.next != NONE {
        symbols[r.next as usize].prev = left;
    }
}

/// The merges of a short segment: repeatedly the best current pair, found by a scan.
fn merge_by_scan(
    vocab: &Vocabulary,
    text: &[u8],
    symbols: &mut [Symbol],
    pairs: &mut Vec<Option<f32>>,
) {
    if symbols.is_empty() {
        return;
    }
    pairs.clear();
    pairs.extend((0..symbols.len() as u32).map(|i| pair_score(vocab, text, symbols, i)));
    loop {
        let mut best: Option<(u32, f32)> = None;
        let mut i = 0u32;
        while i != NONE {
            if let Some(score) = pairs[i as usize]
                && best.is_none_or(|(_, b)| score.total_cmp(&b).is_gt())
            {
                best = Some((i, score));
            }
            i = symbols[i as usize].next;
        }
        let Some((left, _)) = best else { break };
        let right = symbols[left as usize].next;
        merge(symbols, left, right);
        pairs[right as usize] = None;
        pairs[left as usize] = pair_score(vocab, text, symbols, left);
        let prev = symbols[left as usize].prev;
        if prev != NONE {
            pairs[prev as usize] = pair_score(vocab, text, symbols, prev);
        }
    }
}

/// The merges of a long segment, through the priority queue (llama.cpp's algorithm):
/// entries made stale by an earlier merge no longer match their symbols' lengths.
fn merge_by_queue(
    vocab: &Vocabulary,
    text: &[u8],
    symbols: &mut [Symbol],
    queue: &mut BinaryHeap<Bigram>,
) {
    for i in 1..symbols.len() as u32 {
        try_add_bigram(vocab, text, symbols, queue, i - 1, i);
    }
    while let Some(bigram) = queue.pop() {
        let (l, r) = (bigram.left as usize, bigram.right as usize);
        let (left, right) = (symbols[l], symbols[r]);
        if left.len == 0 || right.len == 0 || left.len + right.len != bigram.len {
            continue;
        }
        merge(symbols, bigram.left, bigram.right);
        let prev = symbols[l].prev;
        let next = symbols[l].next;
        try_add_bigram(vocab, text, symbols, queue, prev, bigram.left);
        try_add_bigram(vocab, text, symbols, queue, bigram.left, next);
    }
}

fn try_add_bigram(
    vocab: &Vocabulary,
    text: &[u8],
    symbols: &[Symbol],
    queue: &mut BinaryHeap<Bigram>,
    left: u32,
    right: u32,
) {
    if left == NONE || right == NONE {
        return;
    }
    let (l, r) = (symbols[left as usize], symbols[right as usize]);
    let len = l.len + r.len;
    let piece = &text[l.start as usize..(l.start + len) as usize];
    if let Some(id) = vocab.table.find(piece) {
        queue.push(Bigram {
            score: vocab.scores[id as usize],
            left,
            right,
            len,
        });
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::gguf::TokenType;
    use crate::tokenizer::{TokenizerModel, VocabParts};

    fn vocab() -> Vocabulary {
        let mut tokens: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
        tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>").into_bytes()));
        let pieces = [
            "▁", "a", "b", "c", ".", "▁a", "ab", "▁ab", "b▁", "b▁c", "▁▁", "▁▁a", ".▁", "abc",
            "c▁a",
        ];
        tokens.extend(pieces.iter().map(|p| p.as_bytes().to_vec()));
        let n = tokens.len();
        let mut parts = VocabParts::new(TokenizerModel::Spm, tokens);
        parts.scores = Some((0..n).map(|i| -((i * 7919 % 31) as f32)).collect());
        let mut types = vec![TokenType::Unknown, TokenType::Control, TokenType::Control];
        types.extend([TokenType::Byte; 256]);
        types.extend(vec![TokenType::Normal; pieces.len()]);
        parts.token_types = Some(types);
        Vocabulary::from_parts(parts).unwrap()
    }

    proptest! {
        /// Splitting at word boundaries no token crosses gives the whole-text result.
        #[test]
        fn segmented_equals_whole(words in prop::collection::vec("[abc.é]{0,4}", 0..12)) {
            let v = vocab();
            let text = words.join(" ").replace(' ', "\u{2581}");
            let mut scratch = SpmScratch::default();
            let (mut whole, mut segmented) = (Vec::new(), Vec::new());
            tokenize(&v, text.as_bytes(), &mut scratch, &mut whole);
            tokenize_segmented(&v, text.as_bytes(), &mut scratch, &mut segmented);
            prop_assert_eq!(whole, segmented);
        }

        /// The scan used for short segments merges exactly like the priority queue.
        #[test]
        fn scan_equals_queue(text in "[abc.é▁]{0,24}") {
            let v = vocab();
            let bytes = text.as_bytes();
            let mut scratch = SpmScratch::default();
            let split = |s: &mut SpmScratch| {
                s.symbols.clear();
                let mut offset = 0;
                while offset < bytes.len() {
                    let len = utf8_len(bytes[offset]);
                    let index = s.symbols.len() as u32;
                    let next = if offset + len == bytes.len() { NONE } else { index + 1 };
                    let prev = if index == 0 { NONE } else { index - 1 };
                    s.symbols.push(Symbol { start: offset as u32, len: len as u32, prev, next });
                    offset += len;
                }
            };
            split(&mut scratch);
            merge_by_scan(&v, bytes, &mut scratch.symbols, &mut scratch.pairs);
            let scanned: Vec<(u32, u32)> = scratch.symbols.iter().map(|s| (s.start, s.len)).collect();
            split(&mut scratch);
            merge_by_queue(&v, bytes, &mut scratch.symbols, &mut scratch.queue);
            let queued: Vec<(u32, u32)> = scratch.symbols.iter().map(|s| (s.start, s.len)).collect();
            prop_assert_eq!(scanned, queued);
        }
    }

    #[test]
    fn joiners_are_the_characters_before_inner_marks() {
        let v = vocab();
        assert!(
            v.spm_joins_mark(b"b")
                && v.spm_joins_mark(b".")
                && v.spm_joins_mark("\u{2581}".as_bytes())
        );
        assert!(!v.spm_joins_mark(b"a"));
    }
}
