//! `Grammar`: a parsed GBNF grammar, rules of alternatives of items, before it is
//! compiled to bytes for a vocabulary.

use std::ops::RangeInclusive;

/// A parsed grammar: named rules, one of them `root`. Made by [`Grammar::parse`] from
/// GBNF text (the JSON-schema converter writes GBNF too); compiled for a vocabulary by
/// [`GrammarConstraint::new`](crate::grammar::GrammarConstraint::new).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar {
    pub(crate) rules: Vec<Rule>,
    pub(crate) root: usize,
}

/// One rule: its name, where it was defined, and its alternatives (each a sequence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) name: String,
    /// 1-based line and column of the definition.
    pub(crate) at: (usize, usize),
    pub(crate) alts: Vec<Vec<Item>>,
}

/// A token named in a grammar: `<[123]>` by id or `<text>` by its exact text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenRef {
    /// A token id.
    Id(u32),
    /// A token's text.
    Text(String),
}

/// One element of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item {
    /// A literal string (`"..."`).
    Literal(String),
    /// A set of code points (`[a-z]`, `[^"\\]`).
    Class {
        /// The ranges listed.
        ranges: Vec<RangeInclusive<u32>>,
        /// `[^...]`: every code point not listed.
        negated: bool,
    },
    /// Any code point (`.`).
    AnyChar,
    /// A reference to rule `n`.
    RuleRef(usize),
    /// A whole token (`<[id]>`, `<text>`), or with `negated` any token but it (`!<...>`).
    Token {
        /// Which token.
        token: TokenRef,
        /// Any other token.
        negated: bool,
    },
    /// A parenthesised group of alternatives.
    Group(Vec<Vec<Item>>),
    /// `item{min,max}` (`*`, `+`, `?` and `{m,n}`); `max: None` is unbounded.
    Repeat {
        /// What repeats.
        item: Box<Item>,
        /// The fewest times.
        min: u32,
        /// The most times.
        max: Option<u32>,
    },
}

impl Grammar {
    /// The number of rules (named and written inline as groups are not counted apart).
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// The names of the rules, in order of first appearance.
    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.name.as_str())
    }
}
