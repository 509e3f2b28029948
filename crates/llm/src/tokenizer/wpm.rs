//! WordPiece tokenization (`tokenizer.ggml.model = bert`: BERT, BGE and other encoder
//! vocabularies), as llama.cpp's WPM tokenizer and Hugging Face's `BertNormalizer` +
//! `BertPreTokenizer` + `WordPiece` model do it.
//!
//! Normalization and splitting, character by character: whitespace ends a word;
//! control characters (`\p{C}`), NUL and U+FFFD are dropped; with `strip_accents` the
//! text is NFD-decomposed and marks (`\p{M}`) are dropped; with `lowercase` letters are
//! lowercased; punctuation (`\p{P}`, and ASCII symbols), and CJK ideographs each form a
//! word of their own.
//!
//! Each word then becomes word pieces by greedy longest match from its start: the first
//! piece is looked up with a `▁` prefix (the GGUF spelling of a word-initial piece), the
//! following ones without (the GGUF spelling of BERT's `##` continuations). A word that
//! cannot be covered entirely becomes the unknown token.

use unicode_general_category::{GeneralCategory as Gc, get_general_category};

use super::vocabulary::{TokenId, Vocabulary};

/// The word-initial marker `▁` (U+2581) of the GGUF spelling.
const WORD_MARK: char = '\u{2581}';

/// Reusable working memory for [`tokenize`].
#[derive(Debug, Default)]
pub(crate) struct WpmScratch {
    /// The current word, with its `▁` prefix.
    word: String,
}

/// Tokenizes one piece of plain text, appending ids to `out`.
pub(crate) fn tokenize(
    vocab: &Vocabulary,
    text: &str,
    scratch: &mut WpmScratch,
    out: &mut Vec<TokenId>,
) {
    let word = &mut scratch.word;
    word.clear();
    word.push(WORD_MARK);
    let push_char = |c: char, word: &mut String, out: &mut Vec<TokenId>| {
        if c.is_whitespace() {
            finish_word(vocab, word, out);
            return;
        }
        if c == '\0' || c == '\u{FFFD}' || is_other(c) {
            return;
        }
        if vocab.wpm_strip_accents && is_mark(c) {
            return;
        }
        let alone = is_split_punctuation(c) || is_cjk_ideograph(c);
        if alone {
            finish_word(vocab, word, out);
        }
        if vocab.wpm_lowercase {
            word.extend(c.to_lowercase());
        } else {
            word.push(c);
        }
        if alone {
            finish_word(vocab, word, out);
        }
    };
    for c in text.chars() {
        if vocab.wpm_strip_accents {
            unicode_normalization::char::decompose_canonical(c, |d| push_char(d, word, out));
        } else {
            push_char(c, word, out);
        }
    }
    finish_word(vocab, word, out);
}

/// Turns the word in `word` (`▁` + its characters) into pieces and resets it to `▁`.
fn finish_word(vocab: &Vocabulary, word: &mut String, out: &mut Vec<TokenId>) {
    if word.len() > WORD_MARK.len_utf8() {
        match_pieces(vocab, word, out);
    }
    word.truncate(WORD_MARK.len_utf8());
}

/// Greedy longest-match of `word` against the vocabulary: every piece or, when some
/// position has no matching piece, the unknown token alone.
fn match_pieces(vocab: &Vocabulary, word: &str, out: &mut Vec<TokenId>) {
    let start_len = out.len();
    let bytes = word.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let mut end = bytes.len().min(i + vocab.max_token_len);
        let mut found = None;
        while end > i {
            if word.is_char_boundary(end)
                && let Some(id) = vocab.table.find(&bytes[i..end])
            {
                found = Some(id);
                break;
            }
            end -= 1;
        }
        match found {
            Some(id) => {
                out.push(id);
                i = end;
            }
            None => {
                out.truncate(start_len);
                // `from_parts` refuses a WordPiece vocabulary without an unknown token.
                out.extend(vocab.special.unk);
                return;
            }
        }
    }
}

/// `\p{C}`: control, format, surrogate, private use and unassigned characters.
fn is_other(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    matches!(
        get_general_category(c),
        Gc::Control | Gc::Format | Gc::Surrogate | Gc::PrivateUse | Gc::Unassigned
    )
}

/// `\p{M}`: nonspacing, spacing and enclosing marks.
fn is_mark(c: char) -> bool {
    super::char_class::is_mark(c)
}

/// What BERT splits off as a word of its own: Unicode punctuation (`\p{P}`) and the
/// ASCII symbols (`$+<=>^`|~`).
fn is_split_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    super::char_class::is_punctuation(c)
}

/// The CJK ideograph blocks BERT splits into single characters (the ranges of Hugging
/// Face's `BertPreTokenizer`, which llama.cpp copies: Extension C starts at U+2B920
/// there, not at U+2B820).
fn is_cjk_ideograph(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

/// llama.cpp's `clean_up_tokenization_spaces` for WordPiece, applied to decoded text:
/// no space before `?`, `!`, `.` or `,`; `a ' b` becomes `a'b`; no space before the
/// contractions `'s`, `'m`, `'re` and `'ve`.
pub(crate) fn clean_up_spaces(text: &mut Vec<u8>) {
    // A space before one of `?!.,` goes.
    let mut kept = Vec::with_capacity(text.len());
    for (i, &b) in text.iter().enumerate() {
        if i > 0 && matches!(b, b'?' | b'!' | b'.' | b',') && text[i - 1] == b' ' {
            kept.pop();
        }
        kept.push(b);
    }
    // ` ' ` loses both spaces.
    // (A space taken by one apostrophe cannot serve the next: `a ' ' b` is `a' ' b`.)
    let mut out = Vec::with_capacity(kept.len());
    let mut i = 0;
    let mut after_taken_space = false;
    while i < kept.len() {
        let b = kept[i];
        let spaced = i > 0 && i + 1 < kept.len() && kept[i - 1] == b' ' && kept[i + 1] == b' ';
        if b == b'\'' && spaced && !after_taken_space {
            out.pop();
            out.push(b);
            i += 2;
            after_taken_space = true;
            continue;
        }
        out.push(b);
        i += 1;
        after_taken_space = false;
    }
    // ` 's`, ` 'm`, ` 're`, ` 've` lose their space.
    text.clear();
    for (i, &b) in out.iter().enumerate() {
        if b == b'\'' && i > 0 && out[i - 1] == b' ' {
            let next = &out[i + 1..];
            let joins = matches!(next.first(), Some(b's' | b'm'))
                || next.starts_with(b"re")
                || next.starts_with(b"ve");
            if joins {
                text.pop();
            }
        }
        text.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{Metadata, TokenType};
    use crate::tokenizer::{DetokenizeOptions, TokenizeOptions, TokenizerModel, VocabParts};

    /// `[PAD]` 0, `[UNK]` 1, `[CLS]` 2, `[SEP]` 3, then word pieces in GGUF spelling.
    fn parts(pieces: &[&str]) -> VocabParts {
        let mut tokens: Vec<Vec<u8>> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
            .iter()
            .chain(pieces)
            .map(|t| t.as_bytes().to_vec())
            .collect();
        tokens.shrink_to_fit();
        let mut parts = VocabParts::new(TokenizerModel::Wpm, tokens);
        let mut types = vec![TokenType::Normal; parts.tokens.len()];
        types[..4].fill(TokenType::Control);
        parts.token_types = Some(types);
        parts.special.pad = Some(0);
        parts.special.unk = Some(1);
        parts.special.bos = Some(2);
        parts.special.eos = Some(3);
        parts.special.sep = Some(3);
        parts.add_bos = true;
        parts.add_eos = true;
        parts
    }

    fn vocab() -> Vocabulary {
        Vocabulary::from_parts(parts(&[
            "▁un", "▁unaff", "aff", "able", "▁hello", "▁,", "▁!", "▁'", "s", "▁the", "▁cafe",
            "▁我", "▁t", "▁.", "▁naive", "▁s",
        ]))
        .unwrap()
    }

    fn ids(v: &Vocabulary, text: &str) -> Vec<TokenId> {
        v.tokenize(text, TokenizeOptions::PLAIN)
    }

    #[test]
    fn longest_match_pieces_and_unknown_words() {
        let v = vocab();
        // "▁unaff" beats "▁un"; then "able".
        assert_eq!(ids(&v, "unaffable"), [5, 7]);
        assert_eq!(ids(&v, "unable"), [4, 7]);
        // A word with an uncovered rest is [UNK] alone, not a prefix of pieces.
        assert_eq!(ids(&v, "unaffablex the"), [1, 13]);
        assert_eq!(v.tokenize("the", TokenizeOptions::default()), [2, 13, 3]);
        assert_eq!(v.tokenize("", TokenizeOptions::default()), [2, 3]);
    }

    #[test]
    fn normalizes_and_splits_like_bert() {
        let v = vocab();
        // Case, accents (NFD, marks dropped), whitespace of any kind, controls and
        // zero-width format characters, punctuation and CJK split off.
        assert_eq!(
            ids(&v, " HeLLo,\tCAFÉ\u{00a0}naïve!我\u{200b}the\u{0007}s"),
            [8, 9, 14, 18, 10, 15, 13, 12]
        );
        let mut cased = parts(&["▁Hello", "▁café", "▁hello", "▁cafe"]);
        cased.lowercase = false;
        cased.strip_accents = false;
        let v = Vocabulary::from_parts(cased).unwrap();
        assert_eq!(ids(&v, "Hello café"), [4, 5]);
        assert_eq!(ids(&v, "hello CAFE"), [6, 1]);
    }

    #[test]
    fn detokenizes_with_llama_cpp_space_clean_up() {
        let v = vocab();
        let text = "Hello,the's café ' t!";
        let ids = ids(&v, text);
        assert_eq!(
            v.detokenize(&ids, DetokenizeOptions::default()).unwrap(),
            "hello, the's cafe't!"
        );
        let keep = DetokenizeOptions {
            strip_leading_space: false,
            ..DetokenizeOptions::default()
        };
        assert_eq!(v.detokenize(&ids, keep).unwrap(), " hello, the's cafe't!");
        // [UNK] and the framing render only as special text.
        let framed = v.tokenize("xyz", TokenizeOptions::default());
        assert_eq!(
            v.detokenize(&framed, DetokenizeOptions::default()).unwrap(),
            ""
        );
        let special = DetokenizeOptions {
            render_special: true,
            ..DetokenizeOptions::default()
        };
        assert_eq!(v.detokenize(&framed, special).unwrap(), "[CLS][UNK][SEP]");
    }

    #[test]
    fn clean_up_follows_llama_cpp() {
        let clean = |s: &str| {
            let mut b = s.as_bytes().to_vec();
            clean_up_spaces(&mut b);
            String::from_utf8(b).unwrap()
        };
        assert_eq!(clean(" a , b . c ? d !"), " a, b. c? d!");
        assert_eq!(clean(" a ' ' b"), " a'' b");
        assert_eq!(
            clean(" i 'm you 're we 've he 's i 'll i 'd"),
            " i'm you're we've he's i 'll i 'd"
        );
        assert_eq!(clean(" ' era"), "'era");
        assert_eq!(clean(""), "");
    }

    #[test]
    fn bad_vocabularies_are_errors() {
        let mut no_unk = parts(&["▁a"]);
        no_unk.special.unk = None;
        let e = Vocabulary::from_parts(no_unk).unwrap_err().to_string();
        assert!(e.contains("unknown token"), "{e}");

        let mut bad = parts(&["▁a"]);
        bad.tokens.push(vec![0xff, 0xfe]);
        bad.token_types.as_mut().unwrap().push(TokenType::Normal);
        let e = Vocabulary::from_parts(bad).unwrap_err().to_string();
        assert!(e.contains("token 5") && e.contains("UTF-8"), "{e}");

        let mut empty = parts(&["▁a"]);
        empty.tokens.push(Vec::new());
        empty.token_types.as_mut().unwrap().push(TokenType::Normal);
        let e = Vocabulary::from_parts(empty).unwrap_err().to_string();
        assert!(e.contains("token 5") && e.contains("empty"), "{e}");

        // GGUF defaults: [UNK] is 100, which a 5-token vocabulary does not have.
        let mut md = Metadata::new();
        md.set(crate::gguf::keys::TOKENIZER_MODEL, "bert");
        md.set(
            crate::gguf::keys::TOKENIZER_TOKENS,
            crate::gguf::Array::String(vec![b"[PAD]".to_vec(), "▁a".as_bytes().to_vec()]),
        );
        let e = Vocabulary::from_gguf(&md).unwrap_err().to_string();
        assert!(e.contains("unknown token"), "{e}");
    }

    #[test]
    fn gguf_metadata_round_trips() {
        let mut p = parts(&["▁Hello", "▁hello"]);
        p.lowercase = false;
        p.strip_accents = false;
        let v = Vocabulary::from_parts(p).unwrap();
        let mut md = Metadata::new();
        v.write_gguf_metadata(&mut md);
        let back = Vocabulary::from_gguf(&md).unwrap();
        assert_eq!(back.model(), TokenizerModel::Wpm);
        assert!(!back.lowercase() && !back.strip_accents());
        assert_eq!(back.special(), v.special());
        assert_eq!(
            back.tokenize("Hello hello", TokenizeOptions::default()),
            [2, 4, 5, 3]
        );
    }
}
