//! Tokenizers described by GGUF metadata: SentencePiece-style (`tokenizer.ggml.model =
//! llama`), byte-level BPE (`gpt2`) and WordPiece (`bert`), matching llama.cpp token for
//! token.
//!
//! - [`Vocabulary`]: tokens, scores, types, special ids, flags and lookups; built with
//!   [`Vocabulary::from_gguf`], [`Vocabulary::from_llama2c`] or
//!   [`Vocabulary::from_parts`].
//! - [`Vocabulary::tokenize`] / [`Vocabulary::detokenize`], with [`TokenizeOptions`] and
//!   [`DetokenizeOptions`].
//! - [`TokenStreamDecoder`]: token-by-token text for generation, never splitting a
//!   UTF-8 character.
//! - [`Vocabulary::is_eog`]: the end-of-generation ids (EOS, EOT, `<|eot_id|>`,
//!   `<|im_end|>`, `<end_of_turn>`, ...).
//! - [`PreTokenizer`]: the byte-level BPE word splits selected by
//!   `tokenizer.ggml.pre` (GPT-2, Llama 3, Qwen2, DeepSeek, Tekken, ...).
//!
//! ```
//! use tempra_llm::tokenizer::{TokenizeOptions, TokenizerModel, VocabParts, Vocabulary};
//!
//! // A toy byte-level BPE vocabulary: the 256 byte spellings, then merges.
//! let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| {
//!     let c = match b { b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF => b as char, _ => '?' };
//!     c.to_string().into_bytes()
//! }).collect();
//! tokens[b' ' as usize] = "Ġ".as_bytes().to_vec();
//! tokens.retain(|t| t != b"?"); // drop the unprintable bytes for brevity
//! tokens.extend([b"he".to_vec(), "Ġhe".as_bytes().to_vec()]);
//! let mut parts = VocabParts::new(TokenizerModel::Bpe, tokens);
//! parts.merges = vec![b"h e".to_vec(), "Ġ he".as_bytes().to_vec()];
//! let vocab = Vocabulary::from_parts(parts)?;
//! let ids = vocab.tokenize("he he", TokenizeOptions::PLAIN);
//! assert_eq!(ids.len(), 2);
//! assert_eq!(vocab.detokenize(&ids, Default::default())?, "he he");
//! # Ok::<(), tempra_llm::LlmError>(())
//! ```

mod bpe;
mod bpe_trainer;
mod byte_level;
mod char_class;
mod decode;
mod encode;
mod gguf_vocab;
mod merges;
mod pattern;
mod pre_tokenizer;
mod special_split;
mod spm;
mod stream_decoder;
mod token_table;
mod vocabulary;
mod wpm;

pub use crate::gguf::TokenType;
pub use bpe_trainer::{BpeTrainerConfig, train_byte_level_bpe};
pub use decode::DetokenizeOptions;
pub use encode::TokenizeOptions;
pub use pre_tokenizer::PreTokenizer;
pub use stream_decoder::TokenStreamDecoder;
pub use vocabulary::{SpecialTokens, TokenId, TokenizerModel, VocabParts, Vocabulary};
