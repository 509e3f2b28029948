//! The llama2.c tokenizer file (`tokenizer.bin`, `tok512.bin`) and its conversion to
//! GGUF tokenizer metadata, exactly as llama.cpp's `convert-llama2c-to-ggml` does it.

use crate::error::{LlmError, Result};
use crate::gguf::keys;
use crate::gguf::{Array, Metadata, TokenType};

/// The unknown token's id in llama2.c vocabularies.
pub const UNK_ID: u32 = 0;
/// The BOS token's id in llama2.c vocabularies.
pub const BOS_ID: u32 = 1;
/// The EOS token's id in llama2.c vocabularies.
pub const EOS_ID: u32 = 2;

/// Longest piece accepted, in bytes (real files stay under a few dozen).
const MAX_PIECE_LEN: usize = 1 << 16;

/// SentencePiece's whitespace marker `▁` (U+2581), which llama2.c's export turned back
/// into plain spaces.
const SPM_SPACE: &str = "\u{2581}";

/// A llama2.c vocabulary in GGUF form: the pieces as a `llama` (SentencePiece-style)
/// GGUF vocabulary stores them, with scores and token types.
///
/// Conversion follows llama.cpp's `convert-llama2c-to-ggml`: id 0 becomes `<unk>`
/// (unknown), 1 `<s>` and 2 `</s>` (control); empty pieces are control tokens; pieces
/// spelled `<0xHH>` are byte tokens; spaces become `▁`.
#[derive(Clone, Debug, PartialEq)]
pub struct Llama2cVocab {
    /// The file's `max_token_length`.
    pub max_token_length: u32,
    /// The pieces, GGUF spelling (`▁the`, `<0x0A>`).
    pub tokens: Vec<Vec<u8>>,
    /// One score per piece (merge priority: higher merges first).
    pub scores: Vec<f32>,
    /// One type per piece.
    pub token_types: Vec<TokenType>,
}

fn err(offset: usize, what: impl Into<String>) -> LlmError {
    LlmError::Llama2c {
        file: "tokenizer",
        offset: offset as u64,
        what: what.into(),
    }
}

impl Llama2cVocab {
    /// Parses a tokenizer file that must hold exactly `vocab_size` pieces.
    pub fn parse(bytes: &[u8], vocab_size: usize) -> Result<Llama2cVocab> {
        let mut pos = 0usize;
        let take4 = |pos: &mut usize, what: &str| -> Result<[u8; 4]> {
            let b = bytes
                .get(*pos..*pos + 4)
                .ok_or_else(|| err(*pos, format!("the file ends inside {what}")))?;
            *pos += 4;
            Ok([b[0], b[1], b[2], b[3]])
        };
        let max_len = i32::from_le_bytes(take4(&mut pos, "the header")?);
        let max_token_length =
            u32::try_from(max_len).map_err(|_| err(0, format!("max_token_length is {max_len}")))?;
        // Each piece takes at least 8 bytes: never reserve more than the file can hold.
        let cap = vocab_size.min(bytes.len() / 8);
        let (mut tokens, mut scores, mut token_types) = (
            Vec::with_capacity(cap),
            Vec::with_capacity(cap),
            Vec::with_capacity(cap),
        );
        for id in 0..vocab_size {
            let at = pos;
            let what = format!("token {id}");
            let score = f32::from_le_bytes(take4(&mut pos, &what)?);
            let len = i32::from_le_bytes(take4(&mut pos, &what)?);
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= MAX_PIECE_LEN)
                .ok_or_else(|| err(at + 4, format!("token {id} has length {len}")))?;
            let piece = bytes.get(pos..pos + len).ok_or_else(|| {
                err(
                    pos,
                    format!("the file ends inside token {id} ({len} bytes)"),
                )
            })?;
            pos += len;
            let (text, ty) = gguf_piece(id as u32, piece);
            tokens.push(text);
            scores.push(score);
            token_types.push(ty);
        }
        if pos != bytes.len() {
            return Err(err(
                pos,
                format!(
                    "{} bytes follow the {vocab_size} tokens the model expects",
                    bytes.len() - pos
                ),
            ));
        }
        Ok(Llama2cVocab {
            max_token_length,
            tokens,
            scores,
            token_types,
        })
    }

    /// Reads and parses a tokenizer file.
    pub fn open(path: &std::path::Path, vocab_size: usize) -> Result<Llama2cVocab> {
        let bytes = std::fs::read(path).map_err(|source| LlmError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&bytes, vocab_size)
    }

    /// The number of pieces.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are no pieces.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Adds the GGUF tokenizer keys llama.cpp writes for this vocabulary:
    /// `tokenizer.ggml.model = "llama"`, tokens, scores, token types, and the
    /// unknown/BOS/EOS ids.
    pub fn write_metadata(&self, md: &mut Metadata) {
        md.set(keys::TOKENIZER_MODEL, "llama");
        md.set(keys::TOKENIZER_TOKENS, Array::String(self.tokens.clone()));
        md.set(keys::TOKENIZER_SCORES, Array::F32(self.scores.clone()));
        md.set(
            keys::TOKENIZER_TOKEN_TYPE,
            Array::I32(self.token_types.iter().map(|t| t.as_i32()).collect()),
        );
        md.set(keys::TOKENIZER_UNK_ID, UNK_ID);
        md.set(keys::TOKENIZER_BOS_ID, BOS_ID);
        md.set(keys::TOKENIZER_EOS_ID, EOS_ID);
    }
}

/// The GGUF spelling and type of llama2.c piece `id`.
fn gguf_piece(id: u32, piece: &[u8]) -> (Vec<u8>, TokenType) {
    let (text, ty): (&[u8], TokenType) = match id {
        UNK_ID => (b"<unk>", TokenType::Unknown),
        BOS_ID => (b"<s>", TokenType::Control),
        EOS_ID => (b"</s>", TokenType::Control),
        _ if piece.is_empty() => (piece, TokenType::Control),
        _ if is_byte_piece(piece) => (piece, TokenType::Byte),
        _ => (piece, TokenType::Normal),
    };
    let mut out = Vec::with_capacity(text.len());
    for &b in text {
        if b == b' ' {
            out.extend_from_slice(SPM_SPACE.as_bytes());
        } else {
            out.push(b);
        }
    }
    (out, ty)
}

/// Whether `piece` is `<0xHH>` with two hex digits.
fn is_byte_piece(piece: &[u8]) -> bool {
    piece.len() == 6
        && piece.starts_with(b"<0x")
        && piece[5] == b'>'
        && piece[3..5].iter().all(u8::is_ascii_hexdigit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(pieces: &[(&[u8], f32)]) -> Vec<u8> {
        let mut out = 8i32.to_le_bytes().to_vec();
        for (p, s) in pieces {
            out.extend(s.to_le_bytes());
            out.extend((p.len() as i32).to_le_bytes());
            out.extend(*p);
        }
        out
    }

    #[test]
    fn converts_like_llama_cpp() {
        let bytes = file(&[
            (b"<unk>", 0.0),
            (b"\n<s>\n", 0.0),
            (b"\n</s>\n", 0.0),
            (b"<0x0A>", 0.0),
            (b" the", -1.5),
            (b"", 0.0),
        ]);
        let v = Llama2cVocab::parse(&bytes, 6).unwrap();
        assert_eq!(v.tokens[1], b"<s>");
        assert_eq!(v.tokens[4], "\u{2581}the".as_bytes());
        assert_eq!(v.scores[4], -1.5);
        use TokenType::*;
        assert_eq!(
            v.token_types,
            [Unknown, Control, Control, Byte, Normal, Control]
        );
    }

    #[test]
    fn damaged_files_are_errors() {
        let bytes = file(&[(b"<unk>", 0.0), (b"a", 0.0)]);
        assert!(Llama2cVocab::parse(&bytes, 3).is_err(), "too few tokens");
        assert!(Llama2cVocab::parse(&bytes, 1).is_err(), "trailing bytes");
        for cut in 0..bytes.len() {
            assert!(Llama2cVocab::parse(&bytes[..cut], 2).is_err());
        }
        let mut huge = bytes.clone();
        huge[8..12].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(Llama2cVocab::parse(&huge, 2).is_err());
        Llama2cVocab::parse(&bytes, 2).unwrap();
    }
}
