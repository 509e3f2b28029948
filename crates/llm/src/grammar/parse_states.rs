//! `ParseStates`: the grammar's pushdown parser, with its states interned and their
//! transitions cached.
//!
//! A parse is a stack of positions: the top is the terminal to match next (a byte set or
//! a token element), below it the positions to continue at when each enclosing rule
//! ends (a rule that ends its alternative pushes nothing: tail calls keep repetitions
//! flat). Stacks are hash-consed into an arena of `(position, parent)` nodes, so equal
//! stacks are equal ids. An ambiguous grammar has several parses alive at once: a
//! *state* is the sorted set of its stacks, interned too, and a transition (state, byte
//! class) → state is computed once and cached in a dense table. The empty stack
//! (`ACCEPT`) is a parse that is finished.
//!
//! Memory is bounded: a state holds at most [`MAX_STACKS`] parses (more is an error
//! naming the grammar as too ambiguous), and once the tables pass
//! [`COMPACT_STATES`] states or [`COMPACT_NODES`] nodes, [`ParseStates::compact`] drops
//! everything but the current state; a single token that needs more than
//! [`MAX_STATES`] states is an error.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{LlmError, Result};
use crate::grammar::compiled::{CompiledGrammar, Elem, INFINITE};
use crate::tokenizer::TokenId;

/// The most parses one state may hold.
pub const MAX_STACKS: usize = 1024;
/// The most states the tables may hold while one token's mask is computed.
pub const MAX_STATES: usize = 1 << 15;
/// States beyond which the tables are dropped between tokens.
pub const COMPACT_STATES: usize = 1 << 12;
/// Stack nodes beyond which the tables are dropped between tokens.
pub const COMPACT_NODES: usize = 1 << 17;

/// The state with no parse left.
pub(crate) const DEAD: u32 = 0;
/// A transition not computed yet.
const UNKNOWN: u32 = u32::MAX;
/// The parent of a bottom node.
const NO_PARENT: u32 = u32::MAX;
/// The stack id of the empty (finished) stack.
const ACCEPT: u32 = 0;

const FLAG_ACCEPTS: u8 = 1;
const FLAG_TOKENS: u8 = 2;

/// Interned parse stacks and states of one grammar, with cached transitions.
#[derive(Debug)]
pub(crate) struct ParseStates {
    g: Arc<CompiledGrammar>,
    classes: usize,
    /// Stack nodes: (position, parent); node 0 is `ACCEPT`.
    nodes: Vec<(u32, u32)>,
    node_ids: HashMap<(u32, u32), u32>,
    node_cost: Vec<u32>,
    /// State `s`'s stacks (sorted); state 0 is `DEAD`.
    stacks: Vec<Box<[u32]>>,
    state_ids: HashMap<Box<[u32]>, u32>,
    state_cost: Vec<u32>,
    flags: Vec<u8>,
    /// `trans[s * classes + c]`.
    trans: Vec<u32>,
    work: Vec<(u32, u32)>,
    seen: HashSet<(u32, u32)>,
    out: Vec<u32>,
}

impl ParseStates {
    /// Empty tables for `g`.
    pub(crate) fn new(g: Arc<CompiledGrammar>) -> ParseStates {
        let classes = g.class_count();
        let mut p = ParseStates {
            g,
            classes,
            nodes: Vec::new(),
            node_ids: HashMap::new(),
            node_cost: Vec::new(),
            stacks: Vec::new(),
            state_ids: HashMap::new(),
            state_cost: Vec::new(),
            flags: Vec::new(),
            trans: Vec::new(),
            work: Vec::new(),
            seen: HashSet::new(),
            out: Vec::new(),
        };
        p.reset_tables();
        p
    }

    fn reset_tables(&mut self) {
        self.nodes.clear();
        self.node_ids.clear();
        self.node_cost.clear();
        self.nodes.push((u32::MAX, NO_PARENT));
        self.node_cost.push(0);
        self.stacks.clear();
        self.state_ids.clear();
        self.state_cost.clear();
        self.flags.clear();
        self.trans.clear();
        // DEAD: no stack; its transitions all lead to itself.
        self.stacks.push(Box::new([]));
        self.state_cost.push(INFINITE);
        self.flags.push(0);
        self.trans.extend(std::iter::repeat_n(DEAD, self.classes));
    }

    /// The grammar.
    pub(crate) fn grammar(&self) -> &CompiledGrammar {
        &self.g
    }

    /// The state before any output.
    pub(crate) fn start(&mut self) -> Result<u32> {
        self.out.clear();
        self.seen.clear();
        let root = self.g.root as usize;
        for i in 0..self.g.alts[root].len() {
            let a = self.g.alts[root][i];
            self.work.push((a, NO_PARENT));
        }
        self.expand();
        self.intern_out()
    }

    /// The fewest tokens that finish a parse of state `s` ([`INFINITE`] if none).
    #[inline]
    pub(crate) fn cost(&self, s: u32) -> u32 {
        self.state_cost[s as usize]
    }

    /// Whether some parse of `s` is finished (the output may end here).
    #[inline]
    pub(crate) fn accepts(&self, s: u32) -> bool {
        self.flags[s as usize] & FLAG_ACCEPTS != 0
    }

    /// Whether some parse of `s` waits for a token element.
    #[inline]
    pub(crate) fn waits_for_token(&self, s: u32) -> bool {
        self.flags[s as usize] & FLAG_TOKENS != 0
    }

    /// The state after byte class `class` from `s` (`DEAD` when no parse takes it).
    #[inline]
    pub(crate) fn step(&mut self, s: u32, class: usize) -> Result<u32> {
        let t = self.trans[s as usize * self.classes + class];
        if t != UNKNOWN {
            return Ok(t);
        }
        self.step_slow(s, class)
    }

    #[cold]
    fn step_slow(&mut self, s: u32, class: usize) -> Result<u32> {
        self.out.clear();
        self.seen.clear();
        for i in 0..self.stacks[s as usize].len() {
            let stack = self.stacks[s as usize][i];
            if stack == ACCEPT {
                continue;
            }
            let (pos, parent) = self.nodes[stack as usize];
            if self.g.byte_matches(pos, class) {
                self.work.push((pos + 1, parent));
            }
        }
        self.expand();
        let t = self.intern_out()?;
        self.trans[s as usize * self.classes + class] = t;
        Ok(t)
    }

    /// The state after `bytes` from `s`.
    pub(crate) fn step_bytes(&mut self, mut s: u32, bytes: &[u8]) -> Result<u32> {
        for &b in bytes {
            if s == DEAD {
                break;
            }
            s = self.step(s, self.g.class_of[b as usize] as usize)?;
        }
        Ok(s)
    }

    /// The state after whole token `token` (whose piece is `piece`) from `s`: its bytes
    /// through the byte elements, or the token through a token element.
    pub(crate) fn step_token(&mut self, s: u32, token: TokenId, piece: &[u8]) -> Result<u32> {
        let by_bytes = self.step_bytes(s, piece)?;
        if !self.waits_for_token(s) {
            return Ok(by_bytes);
        }
        self.out.clear();
        self.seen.clear();
        for i in 0..self.stacks[s as usize].len() {
            let stack = self.stacks[s as usize][i];
            let (pos, parent) = self.nodes[stack as usize];
            let takes = match self.g.elems.get(pos as usize) {
                Some(Elem::Token(id)) => *id == token,
                Some(Elem::NotToken(id)) => *id != token,
                _ => false,
            };
            if takes {
                self.work.push((pos + 1, parent));
            }
        }
        self.expand();
        if by_bytes != DEAD {
            self.out.extend_from_slice(&self.stacks[by_bytes as usize]);
        }
        self.intern_out()
    }

    /// The token elements the parses of `s` wait for: `(token, negated, state after)`.
    pub(crate) fn token_waits(&mut self, s: u32) -> Result<Vec<(TokenId, bool, u32)>> {
        let mut waits = Vec::new();
        for i in 0..self.stacks[s as usize].len() {
            let stack = self.stacks[s as usize][i];
            let (pos, parent) = self.nodes[stack as usize];
            let (id, negated) = match self.g.elems.get(pos as usize) {
                Some(Elem::Token(id)) => (*id, false),
                Some(Elem::NotToken(id)) => (*id, true),
                _ => continue,
            };
            self.out.clear();
            self.seen.clear();
            self.work.push((pos + 1, parent));
            self.expand();
            waits.push((id, negated, self.intern_out()?));
        }
        Ok(waits)
    }

    /// Whether the tables have grown past the compaction bounds.
    pub(crate) fn wants_compaction(&self) -> bool {
        self.stacks.len() > COMPACT_STATES || self.nodes.len() > COMPACT_NODES
    }

    /// Drops every table but what state `s` needs; returns `s`'s new id.
    pub(crate) fn compact(&mut self, s: u32) -> Result<u32> {
        let chains: Vec<Vec<u32>> = self.stacks[s as usize]
            .iter()
            .map(|&stack| {
                let mut chain = Vec::new();
                let mut n = stack;
                while n != NO_PARENT && n != ACCEPT {
                    chain.push(self.nodes[n as usize].0);
                    n = self.nodes[n as usize].1;
                }
                chain
            })
            .collect();
        let accepts = self.stacks[s as usize].contains(&ACCEPT);
        self.reset_tables();
        self.out.clear();
        if accepts {
            self.out.push(ACCEPT);
        }
        for chain in chains.iter().filter(|c| !c.is_empty()) {
            let mut parent = NO_PARENT;
            for &pos in chain.iter().rev() {
                parent = self.node(pos, parent);
            }
            self.out.push(parent);
        }
        self.intern_out()
    }

    /// The states and nodes held now.
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (self.stacks.len(), self.nodes.len())
    }

    fn node(&mut self, pos: u32, parent: u32) -> u32 {
        if let Some(&id) = self.node_ids.get(&(pos, parent)) {
            return id;
        }
        let id = self.nodes.len() as u32;
        let below = if parent == NO_PARENT {
            0
        } else {
            self.node_cost[parent as usize]
        };
        self.nodes.push((pos, parent));
        self.node_ids.insert((pos, parent), id);
        self.node_cost.push(
            self.g.pos_cost[pos as usize]
                .saturating_add(below)
                .min(INFINITE),
        );
        id
    }

    /// Runs the pending `work` (positions to start at) to stacks whose tops are
    /// terminals, appended to `out`.
    fn expand(&mut self) {
        while let Some((pos, parent)) = self.work.pop() {
            if !self.seen.insert((pos, parent)) {
                continue;
            }
            match self.g.elems[pos as usize] {
                Elem::End => {
                    if parent == NO_PARENT {
                        self.out.push(ACCEPT);
                    } else {
                        self.work.push(self.nodes[parent as usize]);
                    }
                }
                Elem::Bytes(_) | Elem::Token(_) | Elem::NotToken(_) => {
                    let id = self.node(pos, parent);
                    self.out.push(id);
                }
                Elem::Rule(r) => {
                    let cont = if self.g.elems[pos as usize + 1] == Elem::End {
                        parent
                    } else {
                        self.node(pos + 1, parent)
                    };
                    for i in 0..self.g.alts[r as usize].len() {
                        let a = self.g.alts[r as usize][i];
                        self.work.push((a, cont));
                    }
                }
            }
        }
    }

    /// Interns the stacks in `out` as a state.
    fn intern_out(&mut self) -> Result<u32> {
        self.out.sort_unstable();
        self.out.dedup();
        if self.out.is_empty() {
            return Ok(DEAD);
        }
        if self.out.len() > MAX_STACKS {
            return Err(LlmError::Constraint {
                what: format!(
                    "the grammar is too ambiguous: more than {MAX_STACKS} parses are alive at once (make its alternatives start differently)"
                ),
            });
        }
        if let Some(&id) = self.state_ids.get(self.out.as_slice()) {
            return Ok(id);
        }
        if self.stacks.len() >= MAX_STATES {
            return Err(LlmError::Constraint {
                what: format!(
                    "the grammar needs more than {MAX_STATES} parser states for one token's choices (it is too complex for this vocabulary)"
                ),
            });
        }
        let id = self.stacks.len() as u32;
        let stacks: Box<[u32]> = self.out.as_slice().into();
        let mut cost = INFINITE;
        let mut flags = 0;
        for &stack in stacks.iter() {
            cost = cost.min(self.node_cost[stack as usize]);
            if stack == ACCEPT {
                flags |= FLAG_ACCEPTS;
            } else {
                let pos = self.nodes[stack as usize].0 as usize;
                if matches!(self.g.elems[pos], Elem::Token(_) | Elem::NotToken(_)) {
                    flags |= FLAG_TOKENS;
                }
            }
        }
        self.state_ids.insert(stacks.clone(), id);
        self.stacks.push(stacks);
        self.state_cost.push(cost);
        self.flags.push(flags);
        self.trans
            .extend(std::iter::repeat_n(UNKNOWN, self.classes));
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;
    use crate::grammar::test_vocab::byte_vocab;
    use crate::grammar::token_trie::TokenTrie;

    fn states(text: &str) -> ParseStates {
        let trie = TokenTrie::new(&byte_vocab(&[]), &[]);
        let g =
            CompiledGrammar::new(&Grammar::parse(text).expect("parse"), &trie).expect("compile");
        ParseStates::new(Arc::new(g))
    }

    fn run(p: &mut ParseStates, text: &[u8]) -> u32 {
        let s = p.start().expect("start");
        p.step_bytes(s, text).expect("step")
    }

    #[test]
    fn accepts_exactly_the_language() {
        let mut p = states("root ::= \"a\" [0-9]* (\"x\" | \"yz\") | \"é\"+\n");
        for (text, accepted, alive) in [
            (&b"a12x"[..], true, true),
            (b"ayz", true, true),
            (b"a1y", false, true),
            (b"a1q", false, false),
            ("ééé".as_bytes(), true, true),
            (&"é".as_bytes()[..1], false, true),
            (b"", false, true),
            (b"b", false, false),
            (&[0xC3, 0x28], false, false),
        ] {
            let s = run(&mut p, text);
            assert_eq!(s != DEAD, alive, "{text:?} alive");
            assert_eq!(p.accepts(s), accepted, "{text:?} accepted");
        }
    }

    #[test]
    fn costs_fall_as_the_output_closes() {
        let mut p = states("root ::= \"{\" [a-z]* \"}\" \"\\n\"?\n");
        let s = p.start().expect("start");
        assert_eq!(p.cost(s), 2);
        let s = p.step_bytes(s, b"{abc").expect("step");
        assert_eq!(p.cost(s), 1);
        let s = p.step_bytes(s, b"}").expect("step");
        assert_eq!(p.cost(s), 0);
        assert!(p.accepts(s));
    }

    #[test]
    fn ambiguity_is_bounded_with_an_error() {
        // Each "a" doubles the ways to split the text: the stacks differ by the
        // remaining count of each branch.
        let mut p = states("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"bb\" | \"\"\n");
        let mut s = p.start().expect("start");
        let mut failed = None;
        for i in 0..40 {
            match p.step_bytes(s, b"a") {
                Ok(t) => s = t,
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let (i, e) = failed.expect("must hit the bound");
        assert!(i >= 8, "failed early at {i}");
        assert!(e.to_string().contains("too ambiguous"), "{e}");
    }

    #[test]
    fn compaction_keeps_the_state() {
        let mut p = states("root ::= \"[\" root \"]\" | \"x\"\n");
        let s = run(&mut p, b"[[[");
        let (states_before, _) = p.sizes();
        let s2 = p.compact(s).expect("compact");
        assert!(p.sizes().0 < states_before);
        let end = p.step_bytes(s2, b"x]]]").expect("step");
        assert!(p.accepts(end));
        assert_eq!(p.step_bytes(s2, b"x]]]]").expect("step"), DEAD);
    }

    #[test]
    fn token_elements_take_whole_tokens() {
        let vocab = byte_vocab(&["<ab>"]);
        let trie = TokenTrie::new(&vocab, &[]);
        let ab = vocab.token_id("<ab>".as_bytes()).expect("ab");
        let g = CompiledGrammar::new(
            &Grammar::parse("root ::= <ab> !<ab> \"!\"\n").expect("parse"),
            &trie,
        )
        .expect("compile");
        let mut p = ParseStates::new(Arc::new(g));
        let s = p.start().expect("start");
        assert!(p.waits_for_token(s));
        // The bytes "<ab>" as byte tokens do not make the token.
        assert_eq!(p.step_bytes(s, b"<ab>").expect("bytes"), DEAD);
        let s = p.step_token(s, ab, b"<ab>").expect("token");
        assert_ne!(s, DEAD);
        assert_eq!(p.step_token(s, ab, b"<ab>").expect("not"), DEAD);
        let s = p.step_token(s, 3 + u32::from(b'q'), b"q").expect("other");
        let s = p.step_bytes(s, b"!").expect("bang");
        assert!(p.accepts(s));
    }
}
