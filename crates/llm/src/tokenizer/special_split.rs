//! Splitting text at special-token text before tokenizing (llama.cpp's
//! `tokenizer_st_partition`).
//!
//! Special tokens are taken longest first; each one is searched for, left to right, in
//! every piece of text not yet claimed by a longer one. User-defined tokens are always
//! matched; control and unknown tokens only when the caller asks for it
//! (`parse_special`). A token with `lstrip`/`rstrip` also takes the ASCII whitespace to
//! its left/right.

use crate::gguf::TokenType;

use super::vocabulary::{TokenId, Vocabulary};

/// A piece of the text to tokenize: plain text (a byte range) or a special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// `text[start..end]`.
    Text {
        /// Start byte.
        start: usize,
        /// End byte.
        end: usize,
    },
    /// A special token matched in the text.
    Token(TokenId),
}

/// Splits `text` into fragments (empty text: none). `out` and `scratch` are cleared
/// and reused.
pub(crate) fn partition(
    vocab: &Vocabulary,
    text: &str,
    parse_special: bool,
    out: &mut Vec<Fragment>,
    scratch: &mut Vec<Fragment>,
) {
    out.clear();
    if text.is_empty() {
        return;
    }
    out.push(Fragment::Text {
        start: 0,
        end: text.len(),
    });
    for &id in &vocab.special_cache {
        let ty = vocab.types[id as usize];
        if !parse_special && matches!(ty, TokenType::Control | TokenType::Unknown) {
            continue;
        }
        // The cache holds only UTF-8 texts, so a match falls on char boundaries.
        let Ok(needle) = std::str::from_utf8(vocab.table.text(id)) else {
            continue;
        };
        let found = out.iter().any(|f| match *f {
            Fragment::Text { start, end } => text[start..end].contains(needle),
            Fragment::Token(_) => false,
        });
        if !found {
            continue;
        }
        let (lstrip, rstrip) = vocab.token_strip(id);
        scratch.clear();
        for &fragment in out.iter() {
            let Fragment::Text { mut start, end } = fragment else {
                scratch.push(fragment);
                continue;
            };
            while let Some(at) = text[start..end].find(needle) {
                let m = start + at;
                let mut left_end = m;
                if lstrip {
                    while left_end > start && is_c_space(text.as_bytes()[left_end - 1]) {
                        left_end -= 1;
                    }
                }
                if left_end > start {
                    scratch.push(Fragment::Text {
                        start,
                        end: left_end,
                    });
                }
                scratch.push(Fragment::Token(id));
                start = m + needle.len();
                if rstrip {
                    while start < end && is_c_space(text.as_bytes()[start]) {
                        start += 1;
                    }
                }
            }
            if start < end {
                scratch.push(Fragment::Text { start, end });
            }
        }
        std::mem::swap(out, scratch);
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}
