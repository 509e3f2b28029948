//! Text → token ids: special-token splitting, then SentencePiece or byte-level BPE on
//! each piece of plain text, with BOS/EOS as the vocabulary asks (llama.cpp's
//! `llama_vocab::tokenize`).

use std::ops::Range;

use super::bpe::{self, BpeScratch};
use super::special_split::{self, Fragment};
use super::spm::{self, SpmScratch};
use super::vocabulary::{TokenId, TokenizerModel, Vocabulary};
use super::wpm::{self, WpmScratch};
use crate::error::{LlmError, Result};

/// How [`Vocabulary::tokenize`] treats special tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenizeOptions {
    /// Add BOS / EOS where the vocabulary's `add_bos` / `add_eos` flags ask for them.
    pub add_special: bool,
    /// Recognise control-token text (`<s>`, `<|im_end|>`) in the input as those tokens;
    /// otherwise it is tokenized as plain text. User-defined tokens are recognised
    /// either way.
    pub parse_special: bool,
}

impl Default for TokenizeOptions {
    /// Add BOS/EOS as the vocabulary says; do not parse special-token text.
    fn default() -> Self {
        TokenizeOptions {
            add_special: true,
            parse_special: false,
        }
    }
}

impl TokenizeOptions {
    /// No BOS/EOS, no special-token parsing: the plain tokenization of a text (what
    /// llama.cpp's tokenizer tests compare).
    pub const PLAIN: TokenizeOptions = TokenizeOptions {
        add_special: false,
        parse_special: false,
    };
}

/// Working memory reused across the pieces of one call.
#[derive(Debug, Default)]
struct Scratch {
    fragments: Vec<Fragment>,
    fragments_tmp: Vec<Fragment>,
    escaped: Vec<u8>,
    /// Gemma 4: a piece with its spaces as `▁`.
    escaped_text: String,
    spm: SpmScratch,
    bpe: BpeScratch,
    wpm: WpmScratch,
}

/// SentencePiece's whitespace marker `▁` (U+2581).
const SPACE_MARK: &[u8] = "\u{2581}".as_bytes();

impl Vocabulary {
    /// Tokenizes `text`.
    ///
    /// SentencePiece: spaces become `▁`, each piece of plain text that starts the
    /// input or follows a special token gets a leading `▁` when `add_space_prefix` is
    /// set, characters that are not tokens become byte tokens (`<0xE2>`). Byte-level
    /// BPE: the pre-tokenizer splits each piece into words, the merges run per word
    /// (Gemma 4: after spaces become `▁`). WordPiece: each piece is normalized,
    /// split into words and punctuation, and each word becomes its longest-match word
    /// pieces or the unknown token; `add_special` frames the text as `[CLS] … [SEP]`.
    /// The empty text gives no tokens (just BOS with `add_special`).
    pub fn tokenize(&self, text: &str, options: TokenizeOptions) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        self.tokenize_into(text, options, &mut out);
        out
    }

    /// [`Vocabulary::tokenize`], appending to `out`.
    pub fn tokenize_into(&self, text: &str, options: TokenizeOptions, out: &mut Vec<TokenId>) {
        self.tokenize_spans_into(text, &[], options, out);
    }

    /// [`Vocabulary::tokenize`] where control-token text inside the `literal` byte ranges
    /// of `text` (message text that must stay text) is never a control token, even with
    /// `parse_special`. Everything else splits as [`Vocabulary::tokenize`] splits it, so
    /// with no control-token text overlapping a literal range the ids are the same.
    ///
    /// A range that is not sorted, overlaps the one before it, or does not lie on
    /// character boundaries inside `text` is an [`LlmError::Argument`](crate::LlmError).
    pub fn tokenize_with_literal_spans(
        &self,
        text: &str,
        literal: &[Range<usize>],
        options: TokenizeOptions,
    ) -> Result<Vec<TokenId>> {
        let mut previous_end = 0;
        for (i, span) in literal.iter().enumerate() {
            let valid = span.start >= previous_end
                && span.start <= span.end
                && span.end <= text.len()
                && text.is_char_boundary(span.start)
                && text.is_char_boundary(span.end);
            if !valid {
                return Err(LlmError::Argument {
                    what: format!(
                        "literal span {i} ({}..{}) must be sorted, disjoint and on character boundaries of the {}-byte text",
                        span.start,
                        span.end,
                        text.len()
                    ),
                });
            }
            previous_end = span.end;
        }
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        self.tokenize_spans_into(text, literal, options, &mut out);
        Ok(out)
    }

    /// [`Vocabulary::tokenize_with_literal_spans`] for spans known to be valid,
    /// appending to `out`.
    pub(crate) fn tokenize_spans_into(
        &self,
        text: &str,
        literal: &[Range<usize>],
        options: TokenizeOptions,
        out: &mut Vec<TokenId>,
    ) {
        let mut s = Scratch::default();
        special_split::partition(
            self,
            text,
            options.parse_special,
            literal,
            &mut s.fragments,
            &mut s.fragments_tmp,
        );
        if options.add_special
            && self.add_bos
            && let Some(bos) = self.special.bos
        {
            out.push(bos);
        }
        match self.model {
            TokenizerModel::Spm => {
                let mut prev_special = true;
                for &fragment in &s.fragments {
                    match fragment {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text { start, end } => {
                            let prefix = self.add_space_prefix && prev_special;
                            self.tokenize_spm_text(
                                &text[start..end],
                                prefix,
                                &mut s.escaped,
                                &mut s.spm,
                                out,
                            );
                            prev_special = false;
                        }
                    }
                }
            }
            TokenizerModel::Bpe => {
                let pre = self.pre;
                for &fragment in &s.fragments {
                    match fragment {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text { start, end } => {
                            let mut piece = &text[start..end];
                            if pre.escapes_whitespace() {
                                s.escaped_text.clear();
                                for c in piece.chars() {
                                    if c == ' ' {
                                        s.escaped_text.push('\u{2581}');
                                    } else {
                                        s.escaped_text.push(c);
                                    }
                                }
                                piece = &s.escaped_text;
                            }
                            let bpe_scratch = &mut s.bpe;
                            pre.split(piece, &mut |a, b| {
                                bpe::tokenize_word(self, &piece.as_bytes()[a..b], bpe_scratch, out);
                            });
                        }
                    }
                }
            }
            TokenizerModel::Wpm => {
                for &fragment in &s.fragments {
                    match fragment {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text { start, end } => {
                            wpm::tokenize(self, &text[start..end], &mut s.wpm, out);
                        }
                    }
                }
            }
        }
        if options.add_special
            && self.add_eos
            && let Some(eos) = self.special.eos
        {
            out.push(eos);
        }
    }

    /// Escapes one piece of plain text and runs the SentencePiece merges on it, in
    /// chunks of under 4 GiB (split at character boundaries) for absurdly long input.
    fn tokenize_spm_text(
        &self,
        piece: &str,
        prefix: bool,
        escaped: &mut Vec<u8>,
        scratch: &mut SpmScratch,
        out: &mut Vec<TokenId>,
    ) {
        const CHUNK: usize = (u32::MAX / 4) as usize;
        let mut rest = piece;
        let mut first = true;
        while first || !rest.is_empty() {
            let mut cut = rest.len().min(CHUNK);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            let (chunk, tail) = rest.split_at(cut);
            escaped.clear();
            if prefix && first {
                escaped.extend_from_slice(SPACE_MARK);
            }
            for &b in chunk.as_bytes() {
                if b == b' ' {
                    escaped.extend_from_slice(SPACE_MARK);
                } else {
                    escaped.push(b);
                }
            }
            spm::tokenize_segmented(self, escaped, scratch, out);
            rest = tail;
            first = false;
        }
    }
}
