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
        self.score.total_cmp(&other.score).then_with(|| other.left.cmp(&self.left))
    }
}

/// Reusable working memory for [`tokenize`].
#[derive(Debug, Default)]
pub(crate) struct SpmScratch {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
}

/// The byte length of the UTF-8 sequence a lead byte announces (1 for a stray
/// continuation byte), as llama.cpp's `unicode_len_utf8`.
pub(crate) fn utf8_len(lead: u8) -> usize {
    const LOOKUP: [u8; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(lead >> 4) as usize] as usize
}

/// Tokenizes escaped `text`, appending ids to `out`. `text` must be shorter than
/// 4 GiB (the caller splits longer input).
pub(crate) fn tokenize(vocab: &Vocabulary, text: &[u8], scratch: &mut SpmScratch, out: &mut Vec<TokenId>) {
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
            next: if offset + len == text.len() { NONE } else { index + 1 },
        });
        offset += len;
    }
    for i in 1..symbols.len() as u32 {
        try_add_bigram(vocab, text, symbols, queue, i - 1, i);
    }
    while let Some(bigram) = queue.pop() {
        let (l, r) = (bigram.left as usize, bigram.right as usize);
        let (left, right) = (symbols[l], symbols[r]);
        if left.len == 0 || right.len == 0 || left.len + right.len != bigram.len {
            continue;
        }
        symbols[l].len += right.len;
        symbols[r].len = 0;
        symbols[l].next = right.next;
        if right.next != NONE {
            symbols[right.next as usize].prev = bigram.left;
        }
        let prev = symbols[l].prev;
        let next = symbols[l].next;
        try_add_bigram(vocab, text, symbols, queue, prev, bigram.left);
        try_add_bigram(vocab, text, symbols, queue, bigram.left, next);
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
        queue.push(Bigram { score: vocab.scores[id as usize], left, right, len });
    }
}
