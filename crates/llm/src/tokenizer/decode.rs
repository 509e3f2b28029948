//! Token ids → text: each token's piece (llama.cpp's `token_to_piece`) and whole
//! sequences with SentencePiece's leading-space rule.

use crate::error::Result;
use crate::gguf::TokenType;

use super::byte_level;
use super::vocabulary::{TokenId, TokenizerModel, Vocabulary};
use super::wpm;

/// How [`Vocabulary::detokenize`] renders tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetokenizeOptions {
    /// Render control and unknown tokens as their text (`<s>`, `<|im_end|>`);
    /// otherwise they render as nothing.
    pub render_special: bool,
    /// Drop the space that SentencePiece's space prefix (or WordPiece's word-initial
    /// `▁`) put before the first word (only for vocabularies with `add_space_prefix`,
    /// and WordPiece).
    pub strip_leading_space: bool,
}

impl Default for DetokenizeOptions {
    /// Hide control tokens; drop the space prefix.
    fn default() -> Self {
        DetokenizeOptions {
            render_special: false,
            strip_leading_space: true,
        }
    }
}

/// SentencePiece's whitespace marker `▁` (U+2581).
const SPACE_MARK: &[u8] = "\u{2581}".as_bytes();

/// Whether a piece of this type renders with `render_special` off.
fn renders(ty: TokenType, render_special: bool) -> bool {
    render_special || !matches!(ty, TokenType::Control | TokenType::Unknown)
}

impl Vocabulary {
    /// Appends token `id`'s bytes to `out`: normal SentencePiece (and Gemma 4) pieces
    /// with `▁` as spaces, byte-level BPE pieces decoded from GPT-2's byte spelling,
    /// byte tokens as their byte, user-defined tokens as their text, control and
    /// unknown tokens as their text only with `render_special` (unused and undefined
    /// ones as nothing).
    pub fn token_piece_into(
        &self,
        id: TokenId,
        render_special: bool,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.check_id(id)?;
        let text = self.table.text(id);
        let ty = self.types[id as usize];
        match ty {
            TokenType::Control | TokenType::Unknown => {
                if render_special {
                    out.extend_from_slice(text);
                }
            }
            TokenType::UserDefined => out.extend_from_slice(text),
            TokenType::Normal => match self.model {
                TokenizerModel::Spm | TokenizerModel::Wpm => unescape_into(text, out),
                TokenizerModel::Bpe if self.pre.escapes_whitespace() => unescape_into(text, out),
                TokenizerModel::Bpe => byte_level::decode_into(text, out),
            },
            TokenType::Byte => match parse_byte_token(text) {
                Some(b) => out.push(b),
                None => out.extend_from_slice(text),
            },
            TokenType::Unused | TokenType::Undefined => {}
        }
        Ok(())
    }

    /// Token `id`'s piece as bytes (see [`Vocabulary::token_piece_into`]).
    pub fn token_piece(&self, id: TokenId, render_special: bool) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.token_piece_into(id, render_special, &mut out)?;
        Ok(out)
    }

    /// The bytes of `ids` (see [`Vocabulary::detokenize`]).
    pub fn detokenize_bytes(&self, ids: &[TokenId], options: DetokenizeOptions) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut first = true;
        if self.model == TokenizerModel::Wpm {
            // WordPiece: the clean-up sees llama.cpp's text, leading space included;
            // the space goes afterwards.
            let pieces = DetokenizeOptions {
                strip_leading_space: false,
                ..options
            };
            for &id in ids {
                self.append_piece(id, pieces, &mut first, &mut out)?;
            }
            wpm::clean_up_spaces(&mut out);
            if options.strip_leading_space && out.first() == Some(&b' ') {
                out.remove(0);
            }
            return Ok(out);
        }
        for &id in ids {
            self.append_piece(id, options, &mut first, &mut out)?;
        }
        Ok(out)
    }

    /// The text of `ids`; byte sequences that are not UTF-8 become U+FFFD.
    ///
    /// Control tokens (BOS, EOS, chat markers) render as nothing unless
    /// `render_special`. SentencePiece's leading space: when the vocabulary adds a
    /// space prefix, the first rendered token loses one leading space if it is a normal
    /// piece (as SentencePiece's `decode` does), so `detokenize(tokenize(x)) == x`.
    ///
    /// WordPiece: word-initial pieces (`▁hello`) render with a space, continuations
    /// (`lo`) without; with `strip_leading_space` the first word loses its space (as
    /// Hugging Face's BERT decoder has it; llama.cpp keeps it). The text then gets
    /// llama.cpp's clean-up of tokenization spaces (`hello , world !` becomes
    /// `hello, world!`). The normalization (lowercase, accents, whitespace) is not
    /// undone, and unknown tokens render as nothing unless `render_special`.
    /// [`super::TokenStreamDecoder`] renders the pieces but not the clean-up.
    ///
    /// Errors: an id outside the vocabulary.
    pub fn detokenize(&self, ids: &[TokenId], options: DetokenizeOptions) -> Result<String> {
        let bytes = self.detokenize_bytes(ids, options)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Appends one token's piece, applying the leading-space rule while `first` (the
    /// state of a detokenization: set until a token renders something).
    pub(crate) fn append_piece(
        &self,
        id: TokenId,
        options: DetokenizeOptions,
        first: &mut bool,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.check_id(id)?;
        let ty = self.types[id as usize];
        if !renders(ty, options.render_special) {
            return Ok(());
        }
        let start = out.len();
        self.token_piece_into(id, options.render_special, out)?;
        if *first && out.len() > start {
            *first = false;
            if options.strip_leading_space
                && (self.add_space_prefix || self.model == TokenizerModel::Wpm)
                && ty == TokenType::Normal
                && out[start] == b' '
            {
                out.remove(start);
            }
        }
        Ok(())
    }
}

/// Appends a SentencePiece piece with `▁` turned into spaces.
fn unescape_into(text: &[u8], out: &mut Vec<u8>) {
    let mut rest = text;
    while let Some(pos) = find(rest, SPACE_MARK) {
        out.extend_from_slice(&rest[..pos]);
        out.push(b' ');
        rest = &rest[pos + SPACE_MARK.len()..];
    }
    out.extend_from_slice(rest);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The byte of a `<0xHH>` token.
fn parse_byte_token(text: &[u8]) -> Option<u8> {
    if text.len() == 6 && text.starts_with(b"<0x") && text[5] == b'>' {
        let hex = std::str::from_utf8(&text[3..5]).ok()?;
        u8::from_str_radix(hex, 16).ok()
    } else {
        None
    }
}
