//! Splitting text at special-token text before tokenizing (llama.cpp's
//! `tokenizer_st_partition`).
//!
//! Special tokens are taken longest first; each one is searched for, left to right, in
//! every piece of text not yet claimed by a longer one. User-defined tokens are always
//! matched; control and unknown tokens only when the caller asks for it
//! (`parse_special`). A token with `lstrip`/`rstrip` also takes the ASCII whitespace to
//! its left/right.
//!
//! Literal spans: byte ranges of the text (message text a user wrote) where control and
//! unknown tokens are never matched, even with `parse_special`: a match that overlaps a
//! literal span is left as plain text, so the rest of the text splits exactly as it
//! would without the spans.

use std::ops::Range;

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

/// Splits `text` into fragments (empty text: none). `literal` holds sorted,
/// non-overlapping byte ranges where control and unknown tokens are not matched. `out`
/// and `scratch` are cleared and reused.
pub(crate) fn partition(
    vocab: &Vocabulary,
    text: &str,
    parse_special: bool,
    literal: &[Range<usize>],
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
        let gated = matches!(ty, TokenType::Control | TokenType::Unknown);
        if !parse_special && gated {
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
            let mut search = start;
            while let Some(at) = text[search..end].find(needle) {
                let m = search + at;
                if gated && overlaps(literal, m, m + needle.len()) {
                    // Leave it as text; look again from the next character.
                    search = m + text[m..].chars().next().map_or(1, char::len_utf8);
                    continue;
                }
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
                search = start;
            }
            if start < end {
                scratch.push(Fragment::Text { start, end });
            }
        }
        std::mem::swap(out, scratch);
    }
}

/// Whether `start..end` overlaps one of the sorted, disjoint `spans`.
fn overlaps(spans: &[Range<usize>], start: usize, end: usize) -> bool {
    // The first span ending after `start` is the only candidate.
    let i = spans.partition_point(|s| s.end <= start);
    spans.get(i).is_some_and(|s| s.start < end)
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Metadata;
    use crate::testing::SyntheticVocab;

    fn split(text: &str, literal: &[Range<usize>]) -> Vec<Fragment> {
        let mut md = Metadata::new();
        SyntheticVocab::new(300)
            .expect("vocab")
            .write_metadata(&mut md);
        let vocab = Vocabulary::from_gguf(&md).expect("vocab");
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        partition(&vocab, text, true, literal, &mut out, &mut scratch);
        out
    }

    #[test]
    fn literal_spans_keep_control_text_as_text_and_nothing_else_changes() {
        use Fragment::{Text, Token};
        // `<s>` is id 1, `</s>` id 2.
        let text = "x<s>y</s>";
        assert_eq!(
            split(text, &[]),
            [
                Text { start: 0, end: 1 },
                Token(1),
                Text { start: 4, end: 5 },
                Token(2)
            ]
        );
        // A span covering `<s>`, or only touching part of it, keeps it as text.
        for span in [1..4, 3..4, 0..2] {
            assert_eq!(
                split(text, std::slice::from_ref(&span)),
                [Text { start: 0, end: 5 }, Token(2)],
                "{span:?}"
            );
        }
        // A span next to a token but not overlapping it changes nothing.
        assert_eq!(split(text, std::slice::from_ref(&(4..5))), split(text, &[]));
        assert_eq!(split(text, &[0..1, 4..5]), split(text, &[]));
        // A second occurrence outside the span is still a token.
        assert_eq!(
            split("<s><s>", std::slice::from_ref(&(0..3))),
            [Text { start: 0, end: 3 }, Token(1)]
        );
    }
}
