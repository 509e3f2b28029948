//! `TokenStreamDecoder`: turns generated token ids into text one token at a time,
//! holding back the bytes of a UTF-8 character split across tokens (byte-fallback and
//! byte-level tokens often carry a third of an emoji).

use crate::error::Result;

use super::decode::DetokenizeOptions;
use super::vocabulary::{TokenId, Vocabulary};

/// Incremental detokenizer. Pushing a token returns the text completed so far; the
/// concatenation of everything returned (plus [`TokenStreamDecoder::finish`]) equals
/// [`Vocabulary::detokenize`] of all the ids: no split UTF-8 sequence is ever emitted,
/// and invalid bytes become U+FFFD exactly as the lossy whole-text decoding does.
/// (WordPiece: before the whole-text clean-up of spaces, which needs the text after
/// each space; encoders do not generate.)
///
/// ```
/// # use tempra_llm::tokenizer::{TokenizerModel, VocabParts, Vocabulary, TokenStreamDecoder};
/// # use tempra_llm::gguf::TokenType;
/// let mut tokens: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
/// tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>").into_bytes()));
/// let mut parts = VocabParts::new(TokenizerModel::Spm, tokens);
/// let mut types = vec![TokenType::Unknown, TokenType::Control, TokenType::Control];
/// types.extend([TokenType::Byte; 256]);
/// parts.token_types = Some(types);
/// let vocab = Vocabulary::from_parts(parts)?;
///
/// let mut stream = TokenStreamDecoder::new(Default::default());
/// let euro = [3 + 0xE2, 3 + 0x82, 3 + 0xAC]; // "€" as three byte tokens
/// assert_eq!(stream.push(&vocab, euro[0])?, "");
/// assert_eq!(stream.push(&vocab, euro[1])?, "");
/// assert_eq!(stream.push(&vocab, euro[2])?, "€");
/// assert_eq!(stream.finish(), "");
/// # Ok::<(), tempra_llm::LlmError>(())
/// ```
#[derive(Clone, Debug)]
pub struct TokenStreamDecoder {
    options: DetokenizeOptions,
    /// Bytes not yet emitted: at most an incomplete UTF-8 sequence between calls.
    pending: Vec<u8>,
    /// The text returned by the last call.
    ready: String,
    /// No token has rendered yet (SentencePiece's leading-space rule).
    first: bool,
}

impl TokenStreamDecoder {
    /// A decoder at the start of a sequence.
    pub fn new(options: DetokenizeOptions) -> TokenStreamDecoder {
        TokenStreamDecoder {
            options,
            pending: Vec::with_capacity(16),
            ready: String::with_capacity(64),
            first: true,
        }
    }

    /// Appends token `id` and returns the text it completes (possibly empty).
    ///
    /// Errors: an id outside the vocabulary (the decoder is unchanged).
    pub fn push(&mut self, vocab: &Vocabulary, id: TokenId) -> Result<&str> {
        self.ready.clear();
        vocab.append_piece(id, self.options, &mut self.first, &mut self.pending)?;
        self.drain(false);
        Ok(&self.ready)
    }

    /// Appends a piece given as bytes (a control token the caller renders as its text)
    /// and returns the text it completes.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> &str {
        self.ready.clear();
        if !bytes.is_empty() {
            self.first = false;
        }
        self.pending.extend_from_slice(bytes);
        self.drain(false);
        &self.ready
    }

    /// Ends the sequence: returns what is still held back, with U+FFFD for an
    /// incomplete UTF-8 sequence, and resets the decoder.
    pub fn finish(&mut self) -> &str {
        self.ready.clear();
        self.drain(true);
        self.first = true;
        &self.ready
    }

    /// Forgets held-back bytes and starts a new sequence.
    pub fn reset(&mut self) {
        self.pending.clear();
        self.ready.clear();
        self.first = true;
    }

    /// Whether bytes of an incomplete character are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Moves every complete character (and U+FFFD for each invalid sequence) from
    /// `pending` to `ready`; an incomplete tail stays unless `flush`.
    fn drain(&mut self, flush: bool) {
        let mut consumed = 0;
        loop {
            let rest = &self.pending[consumed..];
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.ready.push_str(s);
                    consumed = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    self.ready
                        .push_str(std::str::from_utf8(&rest[..valid]).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            self.ready.push('\u{FFFD}');
                            consumed += valid + bad;
                        }
                        None => {
                            consumed += valid;
                            if flush {
                                self.ready.push('\u{FFFD}');
                                consumed = self.pending.len();
                            }
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..consumed);
    }
}
