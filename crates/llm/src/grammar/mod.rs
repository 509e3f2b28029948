//! Constrained output: GBNF grammars (and JSON schemas, turned into grammars) that the
//! sampler enforces token by token.
//!
//! - [`Grammar::parse`] reads llama.cpp's GBNF (the `grammar` field of llama-server,
//!   `--grammar FILE`), with errors that give the line and column;
//!   `Grammar::from_json_schema` (feature `json`) turns a JSON schema into one.
//! - [`GrammarConstraint`] compiles a grammar for a vocabulary ([`TokenTrie`]) to bytes
//!   and runs it as a pushdown parser whose states and transitions are cached: it says
//!   whether a token may come next ([`GrammarConstraint::allows`]), which tokens may
//!   ([`GrammarConstraint::fill_mask`], one pass over the vocabulary's trie), and keeps
//!   the output finishable within the tokens left (the budget rule in
//!   [`constraint`](GrammarConstraint)'s docs), so a finished output always parses.
//! - The sampler checks the token it drew first and masks the logits only when the
//!   grammar rejects it ([`Sampler::sample_constrained`](crate::engine::Sampler::sample_constrained)).
//!
//! Memory is bounded: a state holds at most [`MAX_STACKS`] parses (more is an error:
//! the grammar is too ambiguous), the tables are dropped when they pass
//! [`COMPACT_STATES`] states, and one token's choices may need at most [`MAX_STATES`].
//!
//! ```
//! use std::sync::Arc;
//! use tempra_llm::grammar::{Grammar, GrammarConstraint, TokenMask, TokenTrie};
//! use tempra_llm::testing::SyntheticVocab;
//! use tempra_llm::tokenizer::Vocabulary;
//!
//! let mut md = tempra_llm::gguf::Metadata::new();
//! SyntheticVocab::new(400)?.write_metadata(&mut md);
//! let vocab = Vocabulary::from_gguf(&md)?;
//! let trie = Arc::new(TokenTrie::new(&vocab, &[]));
//! let grammar = Grammar::parse(r#"root ::= "yes" | "no""#)?;
//! let mut constraint = GrammarConstraint::new(&grammar, trie)?;
//! assert_eq!(constraint.min_tokens(), Some(3)); // "no" as two byte tokens, then EOS
//! let mut mask = TokenMask::default();
//! constraint.fill_mask(Some(16), &mut mask)?;
//! for id in mask.iter() {
//!     let piece = vocab.token_piece(id, false)?;
//!     assert!(b"yes".starts_with(&piece) || b"no".starts_with(&piece), "{piece:?}");
//! }
//! # Ok::<(), tempra_llm::LlmError>(())
//! ```

mod bytes;
mod compiled;
mod constraint;
mod gbnf;
#[cfg(feature = "json")]
pub(crate) mod gbnf_writer;
#[cfg(feature = "json")]
mod json_numbers;
#[cfg(feature = "json")]
mod json_pattern;
#[cfg(feature = "json")]
pub(crate) mod json_schema;
mod output_constraint;
mod parse_states;
mod rules;
mod token_mask;
mod token_trie;
mod utf8;

pub use compiled::MAX_GRAMMAR_ELEMENTS;
pub use constraint::{GrammarConstraint, MaskCounts};
pub use gbnf::MAX_REPETITION;
#[cfg(feature = "json")]
pub use json_schema::json_schema_gbnf;
pub use output_constraint::{OutputConstraint, Trigger};
pub use parse_states::{COMPACT_NODES, COMPACT_STATES, MAX_STACKS, MAX_STATES};
pub use rules::Grammar;
pub use token_mask::TokenMask;
pub use token_trie::TokenTrie;

#[cfg(test)]
pub(crate) mod test_vocab {
    use crate::gguf::TokenType;
    use crate::tokenizer::{TokenizerModel, VocabParts, Vocabulary};

    /// A SentencePiece vocabulary: `<unk>`, `<s>`, `</s>` (EOS), the 256 byte tokens
    /// (ids 3..=258), then `words` (spaces as `▁`).
    pub(crate) fn byte_vocab(words: &[&str]) -> Vocabulary {
        let mut tokens: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
        let mut types = vec![TokenType::Unknown, TokenType::Control, TokenType::Control];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>").into_bytes());
            types.push(TokenType::Byte);
        }
        for w in words {
            tokens.push(w.replace(' ', "\u{2581}").into_bytes());
            types.push(TokenType::Normal);
        }
        let mut parts = VocabParts::new(TokenizerModel::Spm, tokens);
        parts.token_types = Some(types);
        Vocabulary::from_parts(parts).expect("vocab")
    }

    /// Runs `constraint` to the end with random choices among the allowed tokens (an
    /// end-of-generation token, when allowed, one time in five) within `budget` tokens;
    /// checks at every step that the mask and `allows` agree on a sample of tokens and
    /// that the output ends complete within the budget. Returns the output bytes.
    pub(crate) fn random_walk(
        constraint: &mut super::GrammarConstraint,
        vocab: &Vocabulary,
        seed: u64,
        budget: usize,
    ) -> Vec<u8> {
        let mut rng = tempra_tensor::random::SplitMix64::new(seed);
        let mut mask = super::TokenMask::default();
        let mut out = Vec::new();
        let eos = vocab.eos().expect("eos");
        for used in 0..budget {
            let remaining = budget - used;
            constraint
                .fill_mask(Some(remaining), &mut mask)
                .expect("mask");
            for probe in 0..16 {
                let id = (rng.next_u64() % vocab.len() as u64) as u32 ^ probe;
                if (id as usize) < vocab.len() {
                    assert_eq!(
                        constraint.allows(id, Some(remaining)).expect("allows"),
                        mask.contains(id),
                        "token {id}"
                    );
                }
            }
            let allowed: Vec<u32> = mask.iter().collect();
            assert!(
                !allowed.is_empty(),
                "stuck after {:?}",
                String::from_utf8_lossy(&out)
            );
            let id = if mask.contains(eos) && rng.next_u64().is_multiple_of(5) {
                eos
            } else {
                allowed[(rng.next_u64() % allowed.len() as u64) as usize]
            };
            constraint.accept(id).expect("accept");
            if id == eos {
                return out;
            }
            out.extend(vocab.token_piece(id, false).expect("piece"));
        }
        panic!(
            "no end within {budget} tokens: {:?}",
            String::from_utf8_lossy(&out)
        );
    }
}
