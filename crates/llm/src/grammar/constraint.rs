//! `GrammarConstraint`: which tokens may come next so that the output stays a prefix of
//! the grammar's language and can still be finished in the tokens left.
//!
//! **The budget rule.** Every grammar state has a cost: the fewest tokens that finish
//! some parse of it when each token adds one byte the vocabulary has as a token of its
//! own (computed per position when the grammar is compiled; a token element costs
//! one). With `remaining` tokens left (the one being chosen included), a token is
//! allowed only when, after it, the cost plus one end-of-generation token fits in what
//! is left: `cost(after) + 1 <= remaining - 1`. End-of-generation tokens are allowed
//! exactly when the output is complete. So if the state before a token satisfies
//! `cost + 1 <= remaining`, some single-byte token on a shortest completion keeps it
//! satisfied, and the output always ends with the grammar complete and an
//! end-of-generation token within `max_tokens`: a finished response always parses.
//! [`GrammarConstraint::min_tokens`] is the tokens a request must allow at the start;
//! when the vocabulary lacks the single-byte tokens a completion needs, it is `None`
//! and the output cannot be guaranteed to finish.
//!
//! **The mask.** All allowed tokens are found in one pass over the vocabulary's
//! [`TokenTrie`] in depth-first order: each node's state is its parent's advanced by
//! one byte through the cached transition table, and a node whose state is dead skips
//! its whole subtree. Masks of recent states are cached. Callers check the sampled
//! token first ([`GrammarConstraint::allows`]) and compute the mask only when it is
//! rejected.

use std::sync::Arc;

use crate::error::{LlmError, Result};
use crate::grammar::compiled::{CompiledGrammar, INFINITE};
use crate::grammar::parse_states::{DEAD, ParseStates};
use crate::grammar::rules::Grammar;
use crate::grammar::token_mask::TokenMask;
use crate::grammar::token_trie::TokenTrie;
use crate::tokenizer::TokenId;

/// Masks kept per constraint.
const CACHED_MASKS: usize = 8;

/// A grammar's constraint on one output, token by token.
#[derive(Debug)]
pub struct GrammarConstraint {
    trie: Arc<TokenTrie>,
    states: ParseStates,
    state: u32,
    /// Per trie depth, the state of the node on the walk's path.
    path: Vec<u32>,
    cache: Vec<CachedMask>,
    tick: u64,
    /// Masks computed and served from the cache (for tests and metrics).
    counts: MaskCounts,
}

/// How often a constraint computed a mask and how often its cache served one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaskCounts {
    /// Masks computed by a walk of the trie.
    pub computed: u64,
    /// Masks served from the cache.
    pub cached: u64,
    /// Time spent filling masks (computed or cached), in nanoseconds.
    pub nanos: u64,
}

#[derive(Debug)]
struct CachedMask {
    state: u32,
    mask: TokenMask,
    /// The largest cost among the states the allowed tokens lead to: the mask is valid
    /// under any limit at least this.
    max_cost: u32,
    used: u64,
}

/// The largest cost a token's state may have with `remaining` tokens left, or `None`
/// when only an end-of-generation token fits.
fn limit(remaining: Option<usize>) -> Option<u32> {
    match remaining {
        None => Some(INFINITE),
        Some(r) if r >= 2 => Some((r - 2).min(INFINITE as usize - 1) as u32),
        Some(_) => None,
    }
}

impl GrammarConstraint {
    /// Compiles `grammar` for the vocabulary of `trie`, at the start of the output.
    ///
    /// Errors: [`LlmError::Grammar`] when it does not compile for this vocabulary,
    /// [`LlmError::Constraint`] when its start is already too ambiguous.
    pub fn new(grammar: &Grammar, trie: Arc<TokenTrie>) -> Result<GrammarConstraint> {
        let compiled = Arc::new(CompiledGrammar::new(grammar, &trie)?);
        let mut states = ParseStates::new(compiled);
        let state = states.start()?;
        Ok(GrammarConstraint {
            path: vec![DEAD; trie.max_depth() + 1],
            trie,
            states,
            state,
            cache: Vec::new(),
            tick: 0,
            counts: MaskCounts::default(),
        })
    }

    /// The vocabulary's trie.
    pub fn trie(&self) -> &Arc<TokenTrie> {
        &self.trie
    }

    /// The fewest tokens that finish the output from here, the end-of-generation token
    /// included; `None` when no completion is made of tokens the vocabulary has as
    /// single bytes, so that finishing cannot be guaranteed.
    pub fn min_tokens(&self) -> Option<usize> {
        let cost = self.states.cost(self.state);
        (cost < INFINITE).then_some(cost as usize + 1)
    }

    /// Whether the output so far is complete (an end-of-generation token may come).
    pub fn is_complete(&self) -> bool {
        self.states.accepts(self.state)
    }

    /// Whether the output so far can still be completed.
    pub fn is_alive(&self) -> bool {
        self.state != DEAD
    }

    /// Masks computed and served from the cache so far.
    pub fn mask_counts(&self) -> MaskCounts {
        self.counts
    }

    /// The state after `token`, or `DEAD`.
    fn after(&mut self, token: TokenId) -> Result<u32> {
        let piece = self.trie.piece(token);
        if piece.is_empty() {
            return Ok(DEAD);
        }
        if self.states.waits_for_token(self.state) {
            self.states.step_token(self.state, token, piece)
        } else {
            self.states.step_bytes(self.state, piece)
        }
    }

    /// Whether `token` may come next with `remaining` tokens left (this one included;
    /// `None`: no bound).
    ///
    /// Errors: [`LlmError::Constraint`] when the grammar is too ambiguous.
    pub fn allows(&mut self, token: TokenId, remaining: Option<usize>) -> Result<bool> {
        if self.trie.is_eog(token) {
            return Ok(self.is_complete());
        }
        let Some(limit) = limit(remaining) else {
            return Ok(false);
        };
        let t = self.after(token)?;
        Ok(t != DEAD && self.states.cost(t) <= limit)
    }

    /// Moves past `token` (one [`GrammarConstraint::allows`] said may come).
    ///
    /// Errors: [`LlmError::Constraint`] when the grammar does not allow it.
    pub fn accept(&mut self, token: TokenId) -> Result<()> {
        if self.trie.is_eog(token) {
            if self.is_complete() {
                return Ok(());
            }
            return Err(LlmError::Constraint {
                what: format!("end-of-generation token {token} before the output is complete"),
            });
        }
        let t = self.after(token)?;
        if t == DEAD {
            return Err(LlmError::Constraint {
                what: format!("token {token} does not continue the output"),
            });
        }
        self.set_state(t)
    }

    /// Moves past `bytes` of output; returns false (and stays) when the grammar does not
    /// allow them.
    ///
    /// Errors: [`LlmError::Constraint`] when the grammar is too ambiguous.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<bool> {
        let t = self.states.step_bytes(self.state, bytes)?;
        if t == DEAD {
            return Ok(false);
        }
        self.set_state(t)?;
        Ok(true)
    }

    fn set_state(&mut self, t: u32) -> Result<()> {
        self.state = t;
        if self.states.wants_compaction() {
            self.state = self.states.compact(self.state)?;
            self.cache.clear();
        }
        Ok(())
    }

    /// Fills `mask` (resized to the vocabulary) with every token that may come next
    /// with `remaining` tokens left.
    ///
    /// Errors: [`LlmError::Constraint`] when the grammar is too ambiguous or needs too
    /// many states.
    pub fn fill_mask(&mut self, remaining: Option<usize>, mask: &mut TokenMask) -> Result<()> {
        let began = std::time::Instant::now();
        let result = self.fill_mask_timed(remaining, mask);
        self.counts.nanos += began.elapsed().as_nanos() as u64;
        result
    }

    fn fill_mask_timed(&mut self, remaining: Option<usize>, mask: &mut TokenMask) -> Result<()> {
        self.tick += 1;
        let state = self.state;
        let limit = limit(remaining);
        let cached = self.cache.iter_mut().find(|e| e.state == state);
        let known = cached.is_some();
        if let Some(entry) = cached
            && limit.is_some_and(|l| entry.max_cost <= l)
        {
            entry.used = self.tick;
            mask.copy_from(&entry.mask);
            self.counts.cached += 1;
            return Ok(());
        }
        mask.reset(self.trie.vocab_len());
        self.counts.computed += 1;
        if let Some(l) = limit {
            // Compute with no limit (and cache it) unless this state is known to need
            // the limit.
            let max_cost = if known {
                INFINITE
            } else {
                self.walk(INFINITE, mask)?
            };
            if max_cost > l {
                mask.reset(self.trie.vocab_len());
                self.walk(l, mask)?;
            } else {
                self.remember(state, mask, max_cost);
            }
        }
        if self.states.accepts(state) {
            for &id in self.trie.eog() {
                mask.insert(id);
            }
        }
        Ok(())
    }

    fn remember(&mut self, state: u32, mask: &TokenMask, max_cost: u32) {
        let entry = CachedMask {
            state,
            mask: mask.clone(),
            max_cost,
            used: self.tick,
        };
        if self.cache.len() < CACHED_MASKS {
            self.cache.push(entry);
        } else if let Some(old) = self.cache.iter_mut().min_by_key(|e| e.used) {
            *old = entry;
        }
    }

    /// Marks the tokens (not end-of-generation ones) whose state after them costs at
    /// most `limit`; returns the largest such cost.
    fn walk(&mut self, limit: u32, mask: &mut TokenMask) -> Result<u32> {
        let trie = Arc::clone(&self.trie);
        let nodes = trie.nodes();
        let class_of = self.states.grammar().class_of;
        let mut max_cost = 0;
        self.path[0] = self.state;
        let mut i = 1;
        let n = nodes.len();
        while i < n {
            let d = nodes.depth(i);
            let s = self.path[d - 1];
            let t = self
                .states
                .step(s, class_of[nodes.byte(i) as usize] as usize)?;
            if t == DEAD {
                i = nodes.end(i);
                continue;
            }
            self.path[d] = t;
            let tokens = nodes.tokens(i);
            if !tokens.is_empty() {
                let cost = self.states.cost(t);
                if cost <= limit {
                    max_cost = max_cost.max(cost);
                    for &id in tokens {
                        mask.insert(id);
                    }
                }
            }
            i += 1;
        }
        if self.states.waits_for_token(self.state) {
            for (id, negated, after) in self.states.token_waits(self.state)? {
                let cost = self.states.cost(after);
                if after == DEAD || cost > limit {
                    continue;
                }
                max_cost = max_cost.max(cost);
                if negated {
                    for other in 0..trie.vocab_len() as TokenId {
                        if other != id && !trie.piece(other).is_empty() {
                            mask.insert(other);
                        }
                    }
                } else {
                    mask.insert(id);
                }
            }
        }
        Ok(max_cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::test_vocab::byte_vocab;
    use crate::tokenizer::Vocabulary;

    fn constraint(vocab: &Vocabulary, text: &str) -> GrammarConstraint {
        let trie = Arc::new(TokenTrie::new(vocab, &[]));
        GrammarConstraint::new(&Grammar::parse(text).expect("parse"), trie).expect("constraint")
    }

    fn allowed(c: &mut GrammarConstraint, remaining: Option<usize>) -> Vec<TokenId> {
        let mut mask = TokenMask::default();
        c.fill_mask(remaining, &mut mask).expect("mask");
        mask.iter().collect()
    }

    #[test]
    fn mask_matches_allows_for_every_token() {
        let vocab = byte_vocab(&["{\"", "ab", "\"}", "a\"", "}", " {"]);
        let mut c = constraint(
            &vocab,
            "root ::= \"{\" ( \"\\\"\" [a-z]* \"\\\"\" )? \"}\"\n",
        );
        let mut steps = 0;
        for remaining in [None, Some(30), Some(4), Some(3), Some(2), Some(1)] {
            let mask = allowed(&mut c, remaining);
            for id in 0..vocab.len() as TokenId {
                assert_eq!(
                    c.allows(id, remaining).expect("allows"),
                    mask.binary_search(&id).is_ok(),
                    "token {id} with {remaining:?} left"
                );
            }
            steps += 1;
        }
        assert_eq!(steps, 6);
        // "{" then tight budgets: with 2 left only "}" (then EOG) fits.
        let open = vocab.token_id(b"<0x7B>").expect("{");
        c.accept(open).expect("accept");
        let close = vocab.token_id(b"}").expect("}");
        let close_byte = vocab.token_id(b"<0x7D>").expect("}");
        assert_eq!(allowed(&mut c, Some(2)), vec![close_byte, close]);
        assert!(allowed(&mut c, Some(1)).is_empty());
        c.accept(close).expect("accept");
        assert!(c.is_complete());
        assert_eq!(allowed(&mut c, Some(1)), vec![2]);
    }

    #[test]
    fn min_tokens_and_unfinishable_vocabularies() {
        let vocab = byte_vocab(&[]);
        let c = constraint(&vocab, "root ::= \"abc\"\n");
        assert_eq!(c.min_tokens(), Some(4));
        // A vocabulary with "é" only as one two-byte token: the grammar cannot be
        // finished one byte at a time.
        let mut parts = crate::tokenizer::VocabParts::new(
            crate::tokenizer::TokenizerModel::Bpe,
            vec![
                b"<s>".to_vec(),
                "\u{c3}\u{a9}".as_bytes().to_vec(),
                b"</s>".to_vec(),
            ],
        );
        parts.token_types = Some(vec![
            crate::gguf::TokenType::Control,
            crate::gguf::TokenType::Normal,
            crate::gguf::TokenType::Control,
        ]);
        let vocab = Vocabulary::from_parts(parts).expect("vocab");
        let c = constraint(&vocab, "root ::= \"é\"\n");
        assert_eq!(c.min_tokens(), None);
    }

    #[test]
    fn cached_masks_are_reused_and_identical() {
        let vocab = byte_vocab(&["ab", "ba", "abc"]);
        let mut c = constraint(&vocab, "root ::= [ab]* \"c\"\n");
        let first = allowed(&mut c, Some(100));
        let a = vocab.token_id(b"ab").expect("ab");
        c.accept(a).expect("ab");
        // [ab]* loops on one state: the same mask from the cache.
        let second = allowed(&mut c, Some(100));
        assert_eq!(first, second);
        assert_eq!((c.mask_counts().computed, c.mask_counts().cached), (1, 1));
        // A binding limit is computed afresh.
        let tight = allowed(&mut c, Some(2));
        assert!(tight.len() < second.len());
        assert_eq!(c.mask_counts().computed, 2);
    }
}

#[cfg(test)]
mod walks {
    use std::collections::{BTreeSet, HashMap};
    use std::sync::Arc;

    use super::*;
    use crate::grammar::rules::Item;
    use crate::grammar::test_vocab::random_walk;
    use crate::testing::SyntheticVocab;
    use crate::tokenizer::Vocabulary;

    /// An independent recognizer over the parsed grammar and characters: the end
    /// positions each rule can reach from each start, memoized.
    struct Recognizer<'g> {
        g: &'g Grammar,
        text: Vec<char>,
        memo: HashMap<(usize, usize), BTreeSet<usize>>,
    }

    impl Recognizer<'_> {
        fn seq(&mut self, items: &[Item], from: usize) -> BTreeSet<usize> {
            let mut at: BTreeSet<usize> = [from].into();
            for item in items {
                at = at.into_iter().flat_map(|p| self.item(item, p)).collect();
            }
            at
        }

        fn item(&mut self, item: &Item, p: usize) -> BTreeSet<usize> {
            let c = self.text.get(p).map(|&c| c as u32);
            match item {
                Item::Literal(s) => {
                    let s: Vec<char> = s.chars().collect();
                    if self.text.get(p..p + s.len()) == Some(&s[..]) {
                        [p + s.len()].into()
                    } else {
                        BTreeSet::new()
                    }
                }
                Item::Class { ranges, negated } => match c {
                    Some(c) if ranges.iter().any(|r| r.contains(&c)) != *negated => [p + 1].into(),
                    _ => BTreeSet::new(),
                },
                Item::AnyChar => c.map(|_| [p + 1].into()).unwrap_or_default(),
                Item::RuleRef(r) => self.rule(*r, p),
                Item::Group(alts) => alts.iter().flat_map(|a| self.seq(a, p)).collect(),
                Item::Repeat { item, min, max } => {
                    let mut out = BTreeSet::new();
                    let mut at: BTreeSet<usize> = [p].into();
                    for n in 0..=max.unwrap_or(u32::MAX) {
                        if n >= *min {
                            out.extend(at.iter().copied());
                        }
                        let next: BTreeSet<usize> =
                            at.iter().flat_map(|&q| self.item(item, q)).collect();
                        // Stop once nothing new can be reached.
                        if next.is_empty() || (n >= *min && next.is_subset(&out)) {
                            break;
                        }
                        at = next;
                    }
                    out
                }
                Item::Token { .. } => BTreeSet::new(),
            }
        }

        fn rule(&mut self, r: usize, p: usize) -> BTreeSet<usize> {
            if let Some(done) = self.memo.get(&(r, p)) {
                return done.clone();
            }
            let g = self.g;
            let out: BTreeSet<usize> = g.rules[r]
                .alts
                .iter()
                .flat_map(|a| self.seq(a, p))
                .collect();
            self.memo.insert((r, p), out.clone());
            out
        }
    }

    fn recognizes(g: &Grammar, text: &str) -> bool {
        let mut r = Recognizer {
            g,
            text: text.chars().collect(),
            memo: HashMap::new(),
        };
        let len = r.text.len();
        r.rule(g.root, 0).contains(&len)
    }

    #[test]
    fn every_output_the_sampler_lets_through_parses() {
        let mut md = crate::gguf::Metadata::new();
        SyntheticVocab::new(1200)
            .expect("vocab")
            .write_metadata(&mut md);
        let vocab = Vocabulary::from_gguf(&md).expect("vocab");
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        let grammars = [
            include_str!("testdata/json.gbnf"),
            "root  ::= (expr \"=\" ws term \"\\n\")+\nexpr  ::= term ([-+*/] term)*\nterm  ::= ident | num | \"(\" ws expr \")\" ws\nident ::= [a-z] [a-z0-9_]* ws\nnum   ::= [0-9]+ ws\nws    ::= [ \\t\\n]*\n",
            "root ::= item+\nitem ::= \"- \" [^\\r\\n\\x0b\\x0c\\x85\\u2028\\u2029]+ \"\\n\"\n",
            "root ::= \"<\" (\"é\" | [α-ω]{2,3} | \"x\"?) \">\" (\" \" root)?\n",
        ];
        for (gi, text) in grammars.iter().enumerate() {
            let grammar = Grammar::parse(text).expect("parse");
            for seed in 0..10u64 {
                let mut c =
                    GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
                let budget = c.min_tokens().expect("finishable") + (seed as usize * 5) % 40;
                let out = random_walk(&mut c, &vocab, seed + 100 * gi as u64, budget);
                let out = String::from_utf8(out).expect("utf-8");
                assert!(
                    recognizes(&grammar, &out),
                    "grammar {gi} seed {seed}: {out:?}"
                );
            }
        }
    }
}
