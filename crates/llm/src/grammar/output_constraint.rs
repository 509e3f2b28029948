//! `OutputConstraint`: a grammar that holds the whole output, or one that waits for a
//! trigger (a tool call's opening marker) and holds the output from there on, as
//! llama.cpp's lazy grammars do for `tool_choice: "auto"`.

use crate::engine::Sampler;
use crate::error::Result;
use crate::grammar::GrammarConstraint;

/// What starts a lazy grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// These bytes anywhere in the output; the grammar starts at them.
    Word(Vec<u8>),
    /// These bytes as the first thing the output writes after whitespace.
    Start(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Free output, watching for a trigger.
    Waiting,
    /// The grammar holds the output.
    Active,
    /// A trigger came but what followed it in the same token did not fit the grammar:
    /// the output stays free.
    Off,
}

/// A grammar constraint on an output, active from the start or from a trigger.
#[derive(Debug)]
pub struct OutputConstraint {
    grammar: GrammarConstraint,
    triggers: Vec<Trigger>,
    phase: Phase,
    /// The output so far, while waiting.
    seen: Vec<u8>,
    /// Whether the budget rule applies (from the start, or a trigger came early enough
    /// for the shortest completion to fit).
    budgeted: bool,
}

impl OutputConstraint {
    /// A constraint that holds the whole output.
    pub fn always(grammar: GrammarConstraint) -> OutputConstraint {
        OutputConstraint {
            grammar,
            triggers: Vec::new(),
            phase: Phase::Active,
            seen: Vec::new(),
            budgeted: true,
        }
    }

    /// A constraint that holds the output from the first of `triggers` on (the grammar
    /// must start with the trigger's text).
    pub fn lazy(grammar: GrammarConstraint, triggers: Vec<Trigger>) -> OutputConstraint {
        OutputConstraint {
            grammar,
            triggers,
            phase: Phase::Waiting,
            seen: Vec::new(),
            budgeted: false,
        }
    }

    /// Whether the grammar holds the output now.
    pub fn is_active(&self) -> bool {
        self.phase == Phase::Active
    }

    /// Whether the grammar was triggered and is complete (the output may end here).
    pub fn is_complete(&self) -> bool {
        self.is_active() && self.grammar.is_complete()
    }

    /// The fewest tokens that finish the output from the start (see
    /// [`GrammarConstraint::min_tokens`]); `Some(0)` for a lazy constraint, which needs
    /// none.
    pub fn min_tokens(&self) -> Option<usize> {
        match self.phase {
            Phase::Active => self.grammar.min_tokens(),
            _ => Some(0),
        }
    }

    /// The next token, drawn by `sampler` from `logits` (see
    /// [`Sampler::sample_constrained`]); `None` when the output is complete and the
    /// vocabulary has no end-of-generation token.
    ///
    /// Errors: as [`Sampler::sample_constrained`].
    pub fn next_token(
        &mut self,
        sampler: &mut Sampler,
        logits: &[f32],
        history: &[u32],
        remaining: usize,
    ) -> Result<Option<u32>> {
        if self.phase == Phase::Active {
            let budget = self.budgeted.then_some(remaining);
            return sampler.sample_constrained(logits, history, &mut self.grammar, budget);
        }
        let id = sampler.sample(logits, history);
        if self.phase == Phase::Waiting {
            let piece = self.grammar.trie().piece(id).to_vec();
            self.seen.extend_from_slice(&piece);
            self.watch(remaining.saturating_sub(1))?;
        }
        Ok(Some(id))
    }

    /// Looks for a trigger in what was seen; on one, feeds the grammar from it.
    fn watch(&mut self, remaining: usize) -> Result<()> {
        let mut first: Option<usize> = None;
        let lead = self
            .seen
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        let mut start_possible = false;
        for t in &self.triggers {
            match t {
                Trigger::Word(w) => {
                    if let Some(at) = self.seen.windows(w.len()).position(|x| x == w.as_slice()) {
                        first = Some(first.map_or(at, |f| f.min(at)));
                    }
                }
                Trigger::Start(w) => {
                    let rest = &self.seen[lead..];
                    if rest.starts_with(w) {
                        first = Some(first.map_or(lead, |f| f.min(lead)));
                    } else if w.starts_with(rest) {
                        start_possible = true;
                    }
                }
            }
        }
        let Some(at) = first else {
            if !start_possible {
                // The output's start has passed without a start trigger.
                self.triggers.retain(|t| matches!(t, Trigger::Word(_)));
                // Keep only what could still complete a word trigger.
                let keep = self
                    .triggers
                    .iter()
                    .map(|t| match t {
                        Trigger::Word(w) | Trigger::Start(w) => w.len().saturating_sub(1),
                    })
                    .max()
                    .unwrap_or(0);
                let cut = self.seen.len().saturating_sub(keep);
                self.seen.drain(..cut);
            }
            return Ok(());
        };
        let tail = self.seen.split_off(at);
        self.seen.clear();
        if self.grammar.accept_bytes(&tail)? {
            self.phase = Phase::Active;
            self.budgeted = self.grammar.min_tokens().is_some_and(|m| m <= remaining);
        } else {
            self.phase = Phase::Off;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::engine::SamplerConfig;
    use crate::grammar::test_vocab::byte_vocab;
    use crate::grammar::{Grammar, TokenTrie};

    #[test]
    fn lazy_grammar_holds_the_output_after_its_trigger() {
        let vocab = byte_vocab(&["<call>", "<ca", "ll>", "hi"]);
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        let grammar = Grammar::parse("root ::= \"<call>\" [0-9]+ \"</call>\"\n").expect("grammar");
        let id = |t: &str| vocab.token_id(t.as_bytes()).expect("token");
        let mut logits = vec![0.0f32; vocab.len()];
        let mut c = OutputConstraint::lazy(
            GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("c"),
            vec![Trigger::Word(b"<call>".to_vec())],
        );
        let mut s = Sampler::new(SamplerConfig::greedy());
        let mut pick = |c: &mut OutputConstraint, want: &str, logits: &mut Vec<f32>| {
            logits.iter_mut().for_each(|l| *l = 0.0);
            logits[id(want) as usize] = 10.0;
            c.next_token(&mut s, logits, &[], 50)
                .expect("sample")
                .expect("token")
        };
        // Free text first: "hi" is taken as it is.
        assert_eq!(pick(&mut c, "hi", &mut logits), id("hi"));
        assert!(!c.is_active());
        // The trigger split over two tokens.
        pick(&mut c, "<ca", &mut logits);
        assert!(!c.is_active());
        pick(&mut c, "ll>", &mut logits);
        assert!(c.is_active());
        // Now "hi" is not allowed: a digit comes instead.
        let next = pick(&mut c, "hi", &mut logits);
        assert!(vocab.token_piece(next, false).expect("piece")[0].is_ascii_digit());
    }
}
