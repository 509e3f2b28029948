//! A synthetic SentencePiece-style vocabulary of any size, for random models: special
//! tokens, the 256 byte-fallback tokens, then pieces every one of which a BPE merge can
//! reach (each is a shorter piece plus one letter).

use crate::error::{LlmError, Result};
use crate::gguf::{Array, Metadata, TokenType, keys};

/// Tokens before the pieces: `<unk>`, `<s>`, `</s>` and `<0x00>`..`<0xFF>`.
pub const SPECIAL_AND_BYTE_TOKENS: usize = 3 + 256;

/// A vocabulary in GGUF form.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticVocab {
    /// The pieces.
    pub tokens: Vec<Vec<u8>>,
    /// One score per piece.
    pub scores: Vec<f32>,
    /// One type per piece.
    pub token_types: Vec<TokenType>,
}

impl SyntheticVocab {
    /// A vocabulary of exactly `size` tokens: ids 0 `<unk>`, 1 `<s>`, 2 `</s>`, 3..259
    /// the byte tokens, then `▁`, single characters, and longer pieces built by appending
    /// lowercase letters to `▁`-prefixed or lowercase pieces, breadth first (`▁e`, `▁t`,
    /// ..., `ee`, ..., `▁th`, ...). Shorter pieces score higher, so merges run bottom-up.
    ///
    /// Errors: `size` below 260 (the fixed tokens plus one piece).
    pub fn new(size: usize) -> Result<SyntheticVocab> {
        if size <= SPECIAL_AND_BYTE_TOKENS {
            return Err(LlmError::Argument {
                what: format!(
                    "a vocabulary needs more than {SPECIAL_AND_BYTE_TOKENS} tokens, not {size}"
                ),
            });
        }
        let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(size);
        let mut token_types = Vec::with_capacity(size);
        for (text, ty) in [
            ("<unk>", TokenType::Unknown),
            ("<s>", TokenType::Control),
            ("</s>", TokenType::Control),
        ] {
            tokens.push(text.into());
            token_types.push(ty);
        }
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>").into_bytes());
            token_types.push(TokenType::Byte);
        }
        const LOWER: &str = "etaoinshrdlcumwfgypbvkjxqz";
        let singles = std::iter::once("\u{2581}".to_string())
            .chain(LOWER.chars().map(String::from))
            .chain(LOWER.chars().map(|c| c.to_ascii_uppercase().to_string()))
            .chain("0123456789.,!?'\"-:;()".chars().map(String::from));
        let mut pieces: Vec<String> = Vec::with_capacity(size - SPECIAL_AND_BYTE_TOKENS);
        let want = size - SPECIAL_AND_BYTE_TOKENS;
        pieces.extend(singles.take(want));
        let mut next = 0;
        while pieces.len() < want {
            let stem = pieces[next].clone();
            next += 1;
            if !(stem.starts_with('\u{2581}') || stem.starts_with(|c: char| c.is_ascii_lowercase()))
            {
                continue;
            }
            for c in LOWER.chars().take(want - pieces.len()) {
                pieces.push(format!("{stem}{c}"));
            }
        }
        let mut scores = vec![0.0; SPECIAL_AND_BYTE_TOKENS];
        for (i, piece) in pieces.into_iter().enumerate() {
            tokens.push(piece.into_bytes());
            token_types.push(TokenType::Normal);
            scores.push(-(i as f32));
        }
        Ok(SyntheticVocab {
            tokens,
            scores,
            token_types,
        })
    }

    /// Adds the `llama` tokenizer keys (model, tokens, scores, types, special ids,
    /// add-BOS on, add-EOS off).
    pub fn write_metadata(&self, md: &mut Metadata) {
        md.set(keys::TOKENIZER_MODEL, "llama");
        md.set(keys::TOKENIZER_TOKENS, Array::String(self.tokens.clone()));
        md.set(keys::TOKENIZER_SCORES, Array::F32(self.scores.clone()));
        md.set(
            keys::TOKENIZER_TOKEN_TYPE,
            Array::I32(self.token_types.iter().map(|t| t.as_i32()).collect()),
        );
        md.set(keys::TOKENIZER_UNK_ID, 0u32);
        md.set(keys::TOKENIZER_BOS_ID, 1u32);
        md.set(keys::TOKENIZER_EOS_ID, 2u32);
        md.set(keys::TOKENIZER_ADD_BOS, true);
        md.set(keys::TOKENIZER_ADD_EOS, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn pieces_are_unique_and_reachable() {
        for size in [260, 384, 32000] {
            let v = SyntheticVocab::new(size).unwrap();
            assert_eq!(
                (v.tokens.len(), v.scores.len(), v.token_types.len()),
                (size, size, size)
            );
            let set: HashSet<&[u8]> = v.tokens.iter().map(|t| t.as_slice()).collect();
            assert_eq!(set.len(), size, "unique");
            for t in &v.tokens[SPECIAL_AND_BYTE_TOKENS..] {
                let s = std::str::from_utf8(t).unwrap();
                let mut chars = s.chars();
                chars.next_back();
                let prefix = chars.as_str();
                assert!(
                    prefix.is_empty() || set.contains(prefix.as_bytes()),
                    "{s} unreachable"
                );
            }
        }
        assert!(SyntheticVocab::new(259).is_err());
    }
}
