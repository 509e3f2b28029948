//! The demo training data: generated stories tokenized into one stream, each story
//! preceded by the end-of-text token (as BOS), and windows drawn from it.

use tempra_tensor::random::SplitMix64;

use crate::error::{LlmError, Result};
use crate::tokenizer::{TokenId, TokenizeOptions, Vocabulary};

use super::corpus::StoryGenerator;

/// A token stream of stories: `BOS story BOS story ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenStream {
    tokens: Vec<TokenId>,
    stories: usize,
}

impl TokenStream {
    /// Stories from `generator`, tokenized with `vocab`, until the stream holds at least
    /// `min_tokens` tokens.
    ///
    /// Errors: a vocabulary without a BOS token is an [`LlmError::Argument`].
    pub fn generate(
        generator: &mut StoryGenerator,
        vocab: &Vocabulary,
        min_tokens: usize,
    ) -> Result<TokenStream> {
        let bos = vocab.bos().ok_or_else(|| LlmError::Argument {
            what: "the demo vocabulary needs a BOS (end-of-text) token".into(),
        })?;
        let mut tokens = Vec::with_capacity(min_tokens + 512);
        let mut stories = 0;
        while tokens.len() < min_tokens {
            tokens.push(bos);
            tokens.extend(vocab.tokenize(&generator.story(), TokenizeOptions::PLAIN));
            stories += 1;
        }
        Ok(TokenStream { tokens, stories })
    }

    /// The tokens.
    pub fn tokens(&self) -> &[TokenId] {
        &self.tokens
    }

    /// How many stories the stream holds.
    pub fn stories(&self) -> usize {
        self.stories
    }

    /// A random window of `len + 1` tokens (inputs are the first `len`, targets the
    /// last `len`); `None` when the stream is shorter.
    pub fn sample(&self, rng: &mut SplitMix64, len: usize) -> Option<&[TokenId]> {
        let starts = self.tokens.len().checked_sub(len + 1)? + 1;
        let start = ((rng.next_u64() >> 11) % starts as u64) as usize;
        Some(&self.tokens[start..start + len + 1])
    }

    /// Consecutive non-overlapping windows of `len + 1` tokens (sharing their boundary
    /// token), for evaluation.
    pub fn windows(&self, len: usize) -> impl Iterator<Item = &[TokenId]> {
        let step = len.max(1);
        (0..self.tokens.len().saturating_sub(1))
            .step_by(step)
            .map(move |s| &self.tokens[s..(s + len + 1).min(self.tokens.len())])
            .filter(|w| w.len() >= 2)
    }
}
