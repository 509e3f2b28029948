//! `CompiledGrammar`: a grammar lowered to bytes for one vocabulary. Every rule is a list
//! of alternatives laid out in one element array (each alternative ends with `End`);
//! literals and character classes become byte sets (multi-byte UTF-8 characters become
//! small rules of byte-set sequences); groups and repetitions become generated rules
//! (`x*` is `r ::= x r | ε`, `x{m,n}` is `m` copies and a chain of optional ones), all
//! right-recursive so the parser's stacks stay flat. Compiling refuses left recursion
//! (which the parser cannot run) and computes, for every position, the fewest tokens
//! that finish its rule when each token adds one byte (the budget rule of
//! [`GrammarConstraint`](crate::grammar::GrammarConstraint)).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::error::{LlmError, Result};
use crate::grammar::bytes::ByteSet;
use crate::grammar::rules::{Grammar, Item, TokenRef};
use crate::grammar::token_trie::TokenTrie;
use crate::grammar::utf8;
use crate::tokenizer::TokenId;

/// The most elements a compiled grammar may hold (repetitions expanded).
pub const MAX_GRAMMAR_ELEMENTS: usize = 1 << 20;

/// "Cannot be finished with single-byte tokens".
pub(crate) const INFINITE: u32 = u32::MAX / 4;

/// One element of an alternative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    /// One byte from set `n`.
    Bytes(u16),
    /// Rule `n`.
    Rule(u32),
    /// This token.
    Token(TokenId),
    /// Any token but this one (and not an end-of-generation one).
    NotToken(TokenId),
    /// The end of an alternative.
    End,
}

/// A grammar lowered to bytes, with its byte classes and finishing costs.
#[derive(Debug)]
pub(crate) struct CompiledGrammar {
    pub(crate) elems: Vec<Elem>,
    /// Per rule, where each alternative starts.
    pub(crate) alts: Vec<Vec<u32>>,
    /// Per rule, its name (generated rules: the rule they were written in, with a
    /// suffix).
    pub(crate) names: Vec<String>,
    pub(crate) sets: Vec<ByteSet>,
    /// Bytes no set tells apart share a class.
    pub(crate) class_of: [u8; 256],
    /// A byte of each class.
    pub(crate) class_rep: Vec<u8>,
    /// Per position, the fewest tokens (one byte each, or one whole token for token
    /// elements) that finish its alternative; [`INFINITE`] when none can.
    pub(crate) pos_cost: Vec<u32>,
    pub(crate) root: u32,
}

struct Lower<'a> {
    grammar: &'a Grammar,
    trie: &'a TokenTrie,
    /// Per rule, its alternatives as element lists (without `End`).
    rules: Vec<Vec<Vec<Elem>>>,
    names: Vec<String>,
    /// Per rule, the user rule it belongs to (for errors).
    origin: Vec<usize>,
    sets: Vec<ByteSet>,
    set_ids: HashMap<ByteSet, u16>,
    /// Memo: the rule of each character class already lowered.
    class_rules: HashMap<(Vec<(u32, u32)>, bool), Elem>,
    elements: usize,
}

impl CompiledGrammar {
    /// Lowers `grammar` for the vocabulary of `trie`.
    ///
    /// Errors: [`LlmError::Grammar`] for a token the vocabulary does not have (or one
    /// that ends generation), left recursion, or more than [`MAX_GRAMMAR_ELEMENTS`]
    /// elements; the position is the definition of the rule at fault.
    pub(crate) fn new(grammar: &Grammar, trie: &TokenTrie) -> Result<CompiledGrammar> {
        let n = grammar.rules.len();
        let mut lower = Lower {
            grammar,
            trie,
            rules: vec![Vec::new(); n],
            names: grammar.rules.iter().map(|r| r.name.clone()).collect(),
            origin: (0..n).collect(),
            sets: Vec::new(),
            set_ids: HashMap::new(),
            class_rules: HashMap::new(),
            elements: 0,
        };
        for (r, rule) in grammar.rules.iter().enumerate() {
            let mut alts = Vec::with_capacity(rule.alts.len());
            for alt in &rule.alts {
                let mut seq = Vec::new();
                for item in alt {
                    lower.item(item, r, &mut seq)?;
                }
                lower.count(seq.len() + 1, r)?;
                alts.push(seq);
            }
            lower.rules[r] = alts;
        }
        lower.finish()
    }

    /// Whether byte `b` is in the set of element `pos` (a `Bytes` element).
    #[inline]
    pub(crate) fn byte_matches(&self, pos: u32, class: usize) -> bool {
        match self.elems[pos as usize] {
            Elem::Bytes(set) => self.sets[set as usize].contains(self.class_rep[class]),
            _ => false,
        }
    }

    /// The number of byte classes.
    pub(crate) fn class_count(&self) -> usize {
        self.class_rep.len()
    }
}

impl Lower<'_> {
    fn error(&self, rule: usize, what: String) -> LlmError {
        let at = self.grammar.rules[self.origin[rule]].at;
        LlmError::Grammar {
            line: at.0,
            column: at.1,
            what,
        }
    }

    fn count(&mut self, n: usize, rule: usize) -> Result<()> {
        self.elements += n;
        if self.elements > MAX_GRAMMAR_ELEMENTS {
            let name = &self.grammar.rules[self.origin[rule]].name;
            return Err(self.error(
                rule,
                format!(
                    "the grammar is too large: more than {MAX_GRAMMAR_ELEMENTS} elements once repetitions are expanded (in rule `{name}`)"
                ),
            ));
        }
        Ok(())
    }

    fn set(&mut self, set: ByteSet) -> Elem {
        let next = self.sets.len() as u16;
        let id = *self.set_ids.entry(set).or_insert(next);
        if id == next {
            self.sets.push(set);
        }
        Elem::Bytes(id)
    }

    fn new_rule(&mut self, parent: usize, suffix: &str, alts: Vec<Vec<Elem>>) -> Result<Elem> {
        let id = self.rules.len();
        let origin = self.origin[parent];
        let size: usize = alts.iter().map(|a| a.len() + 1).sum();
        self.rules.push(alts);
        self.names
            .push(format!("{}-{suffix}{id}", self.grammar.rules[origin].name));
        self.origin.push(origin);
        self.count(size, id)?;
        Ok(Elem::Rule(id as u32))
    }

    /// Appends the elements of `item` (in rule `rule`) to `out`.
    fn item(&mut self, item: &Item, rule: usize, out: &mut Vec<Elem>) -> Result<()> {
        match item {
            Item::Literal(text) => {
                for &b in text.as_bytes() {
                    let mut s = ByteSet::EMPTY;
                    s.insert(b);
                    out.push(self.set(s));
                }
            }
            Item::Class { ranges, negated } => out.push(self.class(ranges, *negated, rule)?),
            Item::AnyChar => out.push(self.class(&[0..=utf8::MAX_CHAR], false, rule)?),
            Item::RuleRef(r) => out.push(Elem::Rule(*r as u32)),
            Item::Token { token, negated } => {
                let id = self.token(token, rule)?;
                out.push(if *negated {
                    Elem::NotToken(id)
                } else {
                    Elem::Token(id)
                });
            }
            Item::Group(alts) => {
                let mut lowered = Vec::with_capacity(alts.len());
                for alt in alts {
                    let mut seq = Vec::new();
                    for item in alt {
                        self.item(item, rule, &mut seq)?;
                    }
                    lowered.push(seq);
                }
                if let [one] = lowered.as_slice() {
                    out.extend_from_slice(one);
                } else {
                    out.push(self.new_rule(rule, "group", lowered)?);
                }
            }
            Item::Repeat { item, min, max } => {
                let mut seq = Vec::new();
                self.item(item, rule, &mut seq)?;
                let unit = match seq.as_slice() {
                    [] => return Ok(()),
                    [one] => *one,
                    _ => self.new_rule(rule, "item", vec![seq])?,
                };
                self.count(*min as usize, rule)?;
                out.extend(std::iter::repeat_n(unit, *min as usize));
                match max {
                    None => {
                        // r ::= unit r | ε
                        let id = self.rules.len() as u32;
                        let rep =
                            self.new_rule(rule, "star", vec![vec![unit, Elem::Rule(id)], vec![]])?;
                        out.push(rep);
                    }
                    Some(max) if max > min => {
                        let mut inner = self.new_rule(rule, "opt", vec![vec![unit], vec![]])?;
                        for _ in 1..(max - min) {
                            inner = self.new_rule(rule, "opt", vec![vec![unit, inner], vec![]])?;
                        }
                        out.push(inner);
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// A character class: one byte set when every character is one byte, else a rule of
    /// UTF-8 byte sequences.
    fn class(
        &mut self,
        ranges: &[std::ops::RangeInclusive<u32>],
        negated: bool,
        rule: usize,
    ) -> Result<Elem> {
        let norm = utf8::normalize(ranges, negated);
        let key: Vec<(u32, u32)> = norm.iter().map(|r| (*r.start(), *r.end())).collect();
        if let Some(&elem) = self.class_rules.get(&(key.clone(), negated)) {
            return Ok(elem);
        }
        let mut seqs = Vec::new();
        for r in norm {
            utf8::sequences(r, &mut seqs);
        }
        let mut single = ByteSet::EMPTY;
        let mut alts: Vec<Vec<Elem>> = Vec::new();
        for seq in seqs {
            if let [r] = seq.as_slice() {
                single.union_with(&ByteSet::range(*r.start(), *r.end()));
            } else {
                let elems = seq
                    .iter()
                    .map(|r| self.set(ByteSet::range(*r.start(), *r.end())))
                    .collect();
                alts.push(elems);
            }
        }
        if single.is_empty() && alts.is_empty() {
            return Err(self.error(rule, "a character class that matches no character".into()));
        }
        let elem = if alts.is_empty() {
            self.set(single)
        } else {
            if !single.is_empty() {
                let one = self.set(single);
                alts.insert(0, vec![one]);
            }
            self.new_rule(rule, "char", alts)?
        };
        self.class_rules.insert((key, negated), elem);
        Ok(elem)
    }

    fn token(&self, token: &TokenRef, rule: usize) -> Result<TokenId> {
        let id = match token {
            TokenRef::Id(id) => {
                if (*id as usize) >= self.trie.vocab_len() {
                    return Err(self.error(
                        rule,
                        format!(
                            "token <[{id}]> is out of range (vocabulary of {} tokens)",
                            self.trie.vocab_len()
                        ),
                    ));
                }
                *id
            }
            TokenRef::Text(text) => self.trie.find_text(text.as_bytes()).ok_or_else(|| {
                self.error(rule, format!("no single token of the vocabulary is {text}"))
            })?,
        };
        if self.trie.is_eog(id) {
            return Err(self.error(
                rule,
                format!(
                    "token {id} ends generation: the output ends where the grammar's `root` ends, so the grammar must not name it"
                ),
            ));
        }
        Ok(id)
    }

    fn finish(self) -> Result<CompiledGrammar> {
        let root = self.grammar.root as u32;
        let mut elems = Vec::with_capacity(self.elements);
        let mut alts = Vec::with_capacity(self.rules.len());
        for rule in &self.rules {
            let mut starts = Vec::with_capacity(rule.len());
            for alt in rule {
                starts.push(elems.len() as u32);
                elems.extend_from_slice(alt);
                elems.push(Elem::End);
            }
            alts.push(starts);
        }
        let (class_of, class_rep) = byte_classes(&self.sets);
        let mut g = CompiledGrammar {
            elems,
            alts,
            names: self.names,
            sets: self.sets,
            class_of,
            class_rep,
            pos_cost: Vec::new(),
            root,
        };
        if let Some(cycle) = left_recursion(&g) {
            let first = cycle[0];
            let path: Vec<&str> = cycle.iter().map(|&r| g.names[r].as_str()).collect();
            let what = format!(
                "rule `{}` is left-recursive (it can reach itself before reading anything: {}), which this parser cannot run; rewrite it with repetition",
                self.grammar.rules[self.origin[first]].name,
                path.join(" -> ")
            );
            let at = self.grammar.rules[self.origin[first]].at;
            return Err(LlmError::Grammar {
                line: at.0,
                column: at.1,
                what,
            });
        }
        g.pos_cost = finishing_costs(&g, self.trie.single_bytes());
        Ok(g)
    }
}

impl TokenTrie {
    /// The id of the token whose text is `text`: a control or user-defined token's own
    /// text, or any token's piece.
    pub(crate) fn find_text(&self, text: &[u8]) -> Option<TokenId> {
        let nodes = self.nodes();
        let mut i = 0;
        for (d, &b) in text.iter().enumerate() {
            // Children of node i: from i + 1, skipping over subtrees.
            let mut child = i + 1;
            let end = if i == 0 { nodes.len() } else { nodes.end(i) };
            let mut found = None;
            while child < end && nodes.depth(child) == d + 1 {
                if nodes.byte(child) == b {
                    found = Some(child);
                    break;
                }
                child = nodes.end(child);
            }
            i = found?;
        }
        nodes.tokens(i).first().copied()
    }
}

/// Byte classes: bytes that belong to exactly the same sets share one.
fn byte_classes(sets: &[ByteSet]) -> ([u8; 256], Vec<u8>) {
    let mut class_of = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    let mut index: HashMap<Vec<u64>, u8> = HashMap::new();
    let words = sets.len().div_ceil(64).max(1);
    for b in 0..=255u8 {
        let mut sig = vec![0u64; words];
        for (i, s) in sets.iter().enumerate() {
            if s.contains(b) {
                sig[i / 64] |= 1 << (i % 64);
            }
        }
        let next = reps.len() as u8;
        let class = *index.entry(sig).or_insert(next);
        if class == next && reps.len() == next as usize {
            reps.push(b);
        }
        class_of[b as usize] = class;
    }
    (class_of, reps)
}

/// Rules each rule can start with without reading anything; a cycle is left recursion.
/// Returns the rules of one cycle, if any.
fn left_recursion(g: &CompiledGrammar) -> Option<Vec<usize>> {
    let n = g.alts.len();
    let mut nullable = vec![false; n];
    loop {
        let mut changed = false;
        for r in 0..n {
            if nullable[r] {
                continue;
            }
            let empty = g.alts[r].iter().any(|&start| {
                g.elems[start as usize..]
                    .iter()
                    .take_while(|e| **e != Elem::End)
                    .all(|e| matches!(e, Elem::Rule(s) if nullable[*s as usize]))
            });
            if empty {
                nullable[r] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (r, starts) in g.alts.iter().enumerate() {
        for &start in starts {
            for e in &g.elems[start as usize..] {
                match *e {
                    Elem::Rule(s) => {
                        edges[r].push(s as usize);
                        if !nullable[s as usize] {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        }
    }
    // Iterative depth-first search with colours.
    let mut colour = vec![0u8; n];
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        colour[start] = 1;
        while let Some(&mut (r, ref mut next)) = stack.last_mut() {
            if let Some(&s) = edges[r].get(*next) {
                *next += 1;
                match colour[s] {
                    0 => {
                        colour[s] = 1;
                        stack.push((s, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|&(x, _)| x == s).unwrap_or(0);
                        let mut cycle: Vec<usize> = stack[from..].iter().map(|&(x, _)| x).collect();
                        cycle.push(s);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[r] = 2;
                stack.pop();
            }
        }
    }
    None
}

/// The fewest tokens that finish each position's alternative, when a token adds one
/// byte of `single` (a byte some token is exactly) or is one whole token element:
/// Knuth's generalisation of Dijkstra's algorithm over the rules, then one backward pass
/// over the positions.
fn finishing_costs(g: &CompiledGrammar, single: &ByteSet) -> Vec<u32> {
    let n = g.alts.len();
    let elem_cost = |e: &Elem| match *e {
        Elem::Bytes(s) => {
            if g.sets[s as usize].intersects(single) {
                1
            } else {
                INFINITE
            }
        }
        Elem::Token(_) | Elem::NotToken(_) => 1,
        Elem::Rule(_) | Elem::End => 0,
    };
    // Per alternative: its rule, the known part of its cost, and rule references not
    // yet finished.
    let mut alt_rule = Vec::new();
    let mut alt_sum: Vec<u32> = Vec::new();
    let mut alt_pending: Vec<u32> = Vec::new();
    let mut uses: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (r, starts) in g.alts.iter().enumerate() {
        for &start in starts {
            let a = alt_rule.len();
            alt_rule.push(r);
            let mut sum = 0u32;
            let mut pending = 0;
            for e in g.elems[start as usize..]
                .iter()
                .take_while(|e| **e != Elem::End)
            {
                sum = sum.saturating_add(elem_cost(e)).min(INFINITE);
                if let Elem::Rule(s) = *e {
                    uses[s as usize].push(a);
                    pending += 1;
                }
            }
            alt_sum.push(sum);
            alt_pending.push(pending);
        }
    }
    let mut rule_cost = vec![INFINITE; n];
    let mut done = vec![false; n];
    let mut heap: BinaryHeap<Reverse<(u32, usize)>> = BinaryHeap::new();
    for a in 0..alt_rule.len() {
        if alt_pending[a] == 0 && alt_sum[a] < INFINITE {
            heap.push(Reverse((alt_sum[a], alt_rule[a])));
        }
    }
    while let Some(Reverse((cost, r))) = heap.pop() {
        if done[r] {
            continue;
        }
        done[r] = true;
        rule_cost[r] = cost;
        for &a in &uses[r] {
            alt_sum[a] = alt_sum[a].saturating_add(cost).min(INFINITE);
            alt_pending[a] -= 1;
            if alt_pending[a] == 0 && alt_sum[a] < INFINITE && !done[alt_rule[a]] {
                heap.push(Reverse((alt_sum[a], alt_rule[a])));
            }
        }
    }
    let mut pos_cost = vec![0u32; g.elems.len()];
    let mut after = 0u32;
    for (p, e) in g.elems.iter().enumerate().rev() {
        after = match *e {
            Elem::End => 0,
            Elem::Rule(s) => after.saturating_add(rule_cost[s as usize]).min(INFINITE),
            _ => after.saturating_add(elem_cost(e)).min(INFINITE),
        };
        pos_cost[p] = after;
    }
    pos_cost
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::test_vocab::byte_vocab;

    fn compile(text: &str) -> Result<CompiledGrammar> {
        let vocab = byte_vocab(&["<ab>"]);
        let trie = TokenTrie::new(&vocab, &[]);
        CompiledGrammar::new(&Grammar::parse(text)?, &trie)
    }

    #[test]
    fn left_recursion_is_refused_with_the_rule() {
        let err = compile("root ::= x\nx ::= y \"a\" | \"b\"\ny ::= \"\" | x\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("left-recursive"), "{msg}");
        assert!(
            msg.starts_with("grammar line 2, column 1") || msg.starts_with("grammar line 3"),
            "{msg}"
        );
        let err = compile("root ::= (\"a\"?)*\n").unwrap_err();
        assert!(err.to_string().contains("left-recursive"), "{err}");
        compile("root ::= \"a\" root | \"b\"\n").expect("right recursion is fine");
    }

    #[test]
    fn costs_count_bytes_to_finish() {
        let g =
            compile("root ::= \"ab\" x{2,4} | \"cdefgh\"\nx ::= [0-9] | \"é\"\n").expect("compile");
        let root = g.root as usize;
        let costs: Vec<u32> = g.alts[root]
            .iter()
            .map(|&s| g.pos_cost[s as usize])
            .collect();
        // "ab" + two digits; "cdefgh".
        assert_eq!(costs, vec![4, 6]);
    }

    #[test]
    fn classes_share_byte_classes_and_multibyte_become_rules() {
        let g = compile("root ::= [a-c] [^a-z] \"x\"\n").expect("compile");
        // [^a-z] has multi-byte characters: a generated rule.
        assert!(g.names.iter().any(|n| n.starts_with("root-char")));
        assert_eq!(g.class_of[b'a' as usize], g.class_of[b'b' as usize]);
        assert_ne!(g.class_of[b'a' as usize], g.class_of[b'x' as usize]);
        assert_ne!(g.class_of[b'x' as usize], g.class_of[b'y' as usize]);
    }

    #[test]
    fn tokens_must_exist_and_not_end_generation() {
        assert!(
            compile("root ::= <[999999]>\n")
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert!(
            compile("root ::= <nope>\n")
                .unwrap_err()
                .to_string()
                .contains("no single token")
        );
        assert!(
            compile("root ::= <[2]>\n")
                .unwrap_err()
                .to_string()
                .contains("ends generation")
        );
        let g = compile("root ::= <ab> !<[250]>\n").expect("compile");
        assert!(g.elems.iter().any(|e| matches!(e, Elem::NotToken(250))));
    }
}
