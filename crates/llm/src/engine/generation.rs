//! `Generation`: a cancellable stream of sampled tokens and their text.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tempra_tensor::Tensor;

use crate::engine::sampler::Sampler;
use crate::engine::session::{Session, logits_slice};
use crate::error::Result;
use crate::grammar::GrammarConstraint;
use crate::tokenizer::{DetokenizeOptions, TokenStreamDecoder};

/// When a generation stops.
#[derive(Clone, Debug, Default)]
pub struct StopConditions {
    /// The most tokens to generate (`None`: until an end token or a full context).
    pub max_tokens: Option<usize>,
    /// Stop before the first occurrence of any of these strings in the output.
    pub stop_strings: Vec<String>,
    /// Keep going past end-of-generation tokens (for benchmarks).
    pub ignore_eog: bool,
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token (EOS, EOT, ...).
    EndOfGeneration,
    /// `max_tokens` were generated.
    Length,
    /// A stop string appeared.
    StopString,
    /// The context is full.
    ContextFull,
    /// [`Generation::cancel_handle`] was set.
    Cancelled,
}

/// One generated token and the text it completes (possibly empty: a split UTF-8
/// character or text held back while it could still start a stop string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedPiece {
    /// The token id.
    pub id: u32,
    /// The text to show now.
    pub text: String,
}

/// Generates tokens after a prompt: an iterator of [`GeneratedPiece`]s. The session keeps
/// the tokens (a chat can continue it).
pub struct Generation<'s> {
    session: &'s mut Session,
    sampler: Sampler,
    decoder: TokenStreamDecoder,
    stop: StopConditions,
    logits: Option<Tensor>,
    to_feed: Option<u32>,
    produced: usize,
    held: String,
    cancel: Arc<AtomicBool>,
    finished: Option<FinishReason>,
    constraint: Option<GrammarConstraint>,
}

impl<'s> Generation<'s> {
    /// Runs `prompt` through `session` (one batch) and prepares to sample.
    pub fn new(
        session: &'s mut Session,
        prompt: &[u32],
        sampler: Sampler,
        stop: StopConditions,
    ) -> Result<Self> {
        let logits = if prompt.is_empty() {
            None
        } else {
            Some(session.prefill(prompt)?)
        };
        Ok(Generation {
            session,
            sampler,
            decoder: TokenStreamDecoder::new(DetokenizeOptions {
                render_special: false,
                strip_leading_space: false,
            }),
            stop,
            logits,
            to_feed: None,
            produced: 0,
            held: String::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            finished: None,
            constraint: None,
        })
    }

    /// The same generation with its output held to `constraint` (a grammar or JSON
    /// schema): every token keeps the output a prefix of the grammar's language that
    /// can still be finished within `max_tokens` and the context, and the generation
    /// ends when the grammar is complete and an end-of-generation token comes (even
    /// with `ignore_eog`). Check [`GrammarConstraint::min_tokens`] against the budget
    /// first: below it, the output cannot be finished.
    pub fn with_constraint(mut self, constraint: GrammarConstraint) -> Self {
        self.constraint = Some(constraint);
        self
    }

    /// The constraint, if any (to see whether the output is complete).
    pub fn constraint(&self) -> Option<&GrammarConstraint> {
        self.constraint.as_ref()
    }

    /// A flag that stops the generation at its next token when set (from any thread).
    pub fn cancel_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Why the generation ended (`None` while it runs).
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finished
    }

    /// Tokens generated so far.
    pub fn produced(&self) -> usize {
        self.produced
    }

    /// Text held back at the end (a partial character or stop-string prefix that never
    /// completed); call once the iterator is done.
    pub fn take_remaining_text(&mut self) -> String {
        if self.finished == Some(FinishReason::StopString) {
            return String::new();
        }
        self.held.push_str(self.decoder.finish());
        std::mem::take(&mut self.held)
    }

    fn finish(&mut self, reason: FinishReason) -> Option<Result<GeneratedPiece>> {
        self.finished = Some(reason);
        None
    }

    fn next_piece(&mut self) -> Option<Result<GeneratedPiece>> {
        if self.finished.is_some() {
            return None;
        }
        if self.cancel.load(Ordering::Relaxed) {
            return self.finish(FinishReason::Cancelled);
        }
        if self.stop.max_tokens.is_some_and(|m| self.produced >= m) {
            return self.finish(FinishReason::Length);
        }
        if let Some(token) = self.to_feed.take() {
            if self.session.len() >= self.session.capacity() {
                return self.finish(FinishReason::ContextFull);
            }
            match self.session.step(token) {
                Ok(logits) => self.logits = Some(logits),
                Err(e) => return Some(Err(e)),
            }
        }
        let Some(logits) = self.logits.take() else {
            return self.finish(FinishReason::ContextFull);
        };
        // Tokens that can still come: the budget and the positions left (the last
        // token sampled is never run through the model).
        let room = self.session.capacity() + 1 - self.session.len().min(self.session.capacity());
        let remaining = self
            .stop
            .max_tokens
            .map_or(room, |m| m.saturating_sub(self.produced).min(room));
        let sampled = match logits_slice(&logits) {
            Ok(values) => match self.constraint.as_mut() {
                None => Ok(Some(self.sampler.sample(values, self.session.tokens()))),
                Some(c) => self.sampler.sample_constrained(
                    values,
                    self.session.tokens(),
                    c,
                    Some(remaining),
                ),
            },
            Err(e) => Err(e),
        };
        drop(logits);
        let id = match sampled {
            Ok(Some(id)) => id,
            Ok(None) => return self.finish(FinishReason::EndOfGeneration),
            Err(e) => return Some(Err(e)),
        };
        self.produced += 1;
        let vocab = self.session.model().vocab();
        if (!self.stop.ignore_eog || self.constraint.is_some()) && vocab.is_eog(id) {
            return self.finish(FinishReason::EndOfGeneration);
        }
        let piece = match self.decoder.push(vocab, id) {
            Ok(text) => text.to_owned(),
            Err(e) => return Some(Err(e)),
        };
        self.to_feed = Some(id);
        self.held.push_str(&piece);
        Some(Ok(GeneratedPiece {
            id,
            text: self.release_text(),
        }))
    }

    /// Moves from `held` the text that can no longer be part of a stop string; on a stop
    /// string, returns the text before it and finishes.
    fn release_text(&mut self) -> String {
        let stops = &self.stop.stop_strings;
        if let Some(at) = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            let text = self.held[..at].to_owned();
            self.held.clear();
            self.finished = Some(FinishReason::StopString);
            return text;
        }
        // Keep the longest suffix of `held` that starts some stop string.
        let mut keep_from = self.held.len();
        for s in stops.iter().filter(|s| !s.is_empty()) {
            for (i, _) in self.held.char_indices() {
                if i < keep_from && s.starts_with(&self.held[i..]) {
                    keep_from = i;
                    break;
                }
            }
        }
        let rest = self.held.split_off(keep_from);
        std::mem::replace(&mut self.held, rest)
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<GeneratedPiece>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_piece()
    }
}
