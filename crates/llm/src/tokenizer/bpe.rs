//! Byte-level BPE on one pre-tokenized word (llama.cpp's `llm_tokenizer_bpe_session`,
//! Hugging Face's `BPE` model): start from the word's bytes (each a token in a
//! byte-level vocabulary) and repeatedly apply the lowest-ranked merge among adjacent
//! pairs (ties: leftmost). Gemma 4's vocabulary is not byte-level: its words start as
//! UTF-8 characters, and a character that is no token falls back to `<0xXX>` tokens.
//!
//! Symbols carry token ids, merges are looked up by id pair, and the working memory
//! lives in a scratch the caller reuses: nothing is allocated per token.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::byte_level;
use super::spm;
use super::vocabulary::{TokenId, Vocabulary};

/// No neighbour / no token.
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Symbol {
    /// The token, or [`NONE`] for a byte (character) the vocabulary cannot spell.
    id: u32,
    /// Where the symbol's bytes start in the word (for the no-token fallback).
    start: u32,
    /// The symbol's length in bytes as it started (for the no-token fallback).
    len: u32,
    alive: bool,
    prev: u32,
    next: u32,
}

#[derive(Clone, Copy, Debug)]
struct Bigram {
    rank: u32,
    left: u32,
    right: u32,
    left_id: u32,
    right_id: u32,
    merged: u32,
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
    /// Max-heap order: the lowest rank first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Reusable working memory for [`tokenize_word`].
#[derive(Debug, Default)]
pub(crate) struct BpeScratch {
    symbols: Vec<Symbol>,
    queue: BinaryHeap<Bigram>,
    /// The word in byte-level spelling (for the whole-word lookup).
    spelled: String,
}

/// Longest word merged as one piece; longer ones (a gigabyte of one character class)
/// are merged in pieces of this size, so that symbol indices fit `u32`.
const MAX_WORD: usize = 1 << 30;

/// Tokenizes one word (raw bytes), appending ids to `out`.
pub(crate) fn tokenize_word(
    vocab: &Vocabulary,
    word: &[u8],
    scratch: &mut BpeScratch,
    out: &mut Vec<TokenId>,
) {
    if word.len() > MAX_WORD {
        for chunk in word.chunks(MAX_WORD) {
            tokenize_word(vocab, chunk, scratch, out);
        }
        return;
    }
    if word.is_empty() {
        return;
    }
    let byte_encoded = vocab.pre.byte_encoded();
    if vocab.ignore_merges {
        let found = if byte_encoded {
            scratch.spelled.clear();
            byte_level::encode_into(word, &mut scratch.spelled);
            vocab.table.find(scratch.spelled.as_bytes())
        } else {
            vocab.table.find(word)
        };
        if let Some(id) = found {
            out.push(id);
            return;
        }
    }
    if !byte_encoded
        && word.iter().all(|&b| b == b'\n')
        && let Some(id) = vocab.table.find(word)
    {
        // Gemma 4: a run of newlines that is a token is taken whole (llama.cpp).
        out.push(id);
        return;
    }
    if byte_encoded && word.len() == 1 {
        push_symbol(
            vocab,
            vocab.byte_tokens[word[0] as usize].unwrap_or(NONE),
            word,
            out,
        );
        return;
    }
    let symbols = &mut scratch.symbols;
    let queue = &mut scratch.queue;
    symbols.clear();
    queue.clear();
    let mut start = 0;
    while start < word.len() {
        let len = if byte_encoded {
            1
        } else {
            spm::utf8_len(word[start]).min(word.len() - start)
        };
        let id = if byte_encoded {
            vocab.byte_tokens[word[start] as usize]
        } else {
            vocab.table.find(&word[start..start + len])
        };
        let i = symbols.len() as u32;
        symbols.push(Symbol {
            id: id.unwrap_or(NONE),
            start: start as u32,
            len: len as u32,
            alive: true,
            prev: if i == 0 { NONE } else { i - 1 },
            next: if start + len == word.len() {
                NONE
            } else {
                i + 1
            },
        });
        start += len;
    }
    let n = symbols.len() as u32;
    for i in 1..n {
        add_bigram(vocab, symbols, queue, i - 1, i);
    }
    while let Some(bigram) = queue.pop() {
        let (l, r) = (bigram.left as usize, bigram.right as usize);
        let (left, right) = (symbols[l], symbols[r]);
        if !left.alive || !right.alive || left.id != bigram.left_id || right.id != bigram.right_id {
            continue;
        }
        symbols[l].id = bigram.merged;
        symbols[r].alive = false;
        symbols[l].next = right.next;
        if right.next != NONE {
            symbols[right.next as usize].prev = bigram.left;
        }
        let prev = symbols[l].prev;
        let next = symbols[l].next;
        add_bigram(vocab, symbols, queue, prev, bigram.left);
        add_bigram(vocab, symbols, queue, bigram.left, next);
    }
    let mut i = 0u32;
    while i != NONE {
        let s = symbols[i as usize];
        push_symbol(
            vocab,
            s.id,
            &word[s.start as usize..(s.start + s.len) as usize],
            out,
        );
        i = s.next;
    }
}

/// Appends a final symbol; `raw` is the text it started as (a byte, or for Gemma 4 a
/// character) when it has no token. Such a symbol is looked up the way llama.cpp does
/// and otherwise dropped: byte-level, each byte of its byte-level spelling as a
/// one-byte token; Gemma 4, each byte as its `<0xXX>` token.
fn push_symbol(vocab: &Vocabulary, id: u32, raw: &[u8], out: &mut Vec<TokenId>) {
    if id != NONE {
        out.push(id);
        return;
    }
    if !vocab.pre.byte_encoded() {
        out.extend(raw.iter().filter_map(|&b| vocab.byte_tokens[b as usize]));
        return;
    }
    let mut buf = [0u8; 4];
    for &byte in raw {
        for &b in byte_level::BYTE_TO_CHAR[byte as usize]
            .encode_utf8(&mut buf)
            .as_bytes()
        {
            if let Some(id) = vocab.table.find(&[b]) {
                out.push(id);
            }
        }
    }
}

fn add_bigram(
    vocab: &Vocabulary,
    symbols: &[Symbol],
    queue: &mut BinaryHeap<Bigram>,
    left: u32,
    right: u32,
) {
    if left == NONE || right == NONE {
        return;
    }
    let (l, r) = (symbols[left as usize].id, symbols[right as usize].id);
    if l == NONE || r == NONE {
        return;
    }
    if let Some((rank, merged)) = vocab.merges.get(l, r) {
        queue.push(Bigram {
            rank,
            left,
            right,
            left_id: l,
            right_id: r,
            merged,
        });
    }
}
