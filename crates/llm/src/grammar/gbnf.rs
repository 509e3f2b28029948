//! The GBNF parser: llama.cpp's grammar syntax (`name ::= alternatives`, literals,
//! character classes, `.`, groups, `*` `+` `?` `{m,n}`, `#` comments, tokens `<[id]>`,
//! `<text>` and `!<...>`), with errors that give the line and column.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use crate::error::{LlmError, Result};
use crate::grammar::rules::{Grammar, Item, Rule, TokenRef};

/// The largest repetition count (`{m,n}`) a grammar may write.
pub const MAX_REPETITION: u32 = 10_000;

/// The deepest nesting of groups a grammar may write.
const MAX_NESTING: usize = 64;

impl Grammar {
    /// Parses GBNF text, as llama.cpp's `grammar` field and `--grammar-file` take it.
    ///
    /// Names are letters, digits, `-` and `_`; a rule ends at a newline (newlines are
    /// allowed inside parentheses and after `|`); `root` is where the output starts.
    /// Literal strings and classes take the escapes `\n \r \t \\ \" \[ \] \- \xHH
    /// \uHHHH \UHHHHHHHH`.
    ///
    /// Errors: [`LlmError::Grammar`] with the line and column of the first problem (a
    /// syntax error, a rule defined twice, a rule used but never defined, no `root`, a
    /// repetition count above [`MAX_REPETITION`]).
    ///
    /// ```
    /// use tempra_llm::grammar::Grammar;
    ///
    /// let g = Grammar::parse("root ::= \"yes\" | \"no\"  # an answer\n")?;
    /// assert_eq!(g.rule_count(), 1);
    /// let err = Grammar::parse("root ::= answer\n").unwrap_err();
    /// assert_eq!(err.to_string(), "grammar line 1, column 10: rule `answer` is used but never defined");
    /// # Ok::<(), tempra_llm::LlmError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Grammar> {
        let mut parser = Parser {
            text,
            pos: 0,
            rules: Vec::new(),
            names: HashMap::new(),
            first_use: Vec::new(),
            defined: Vec::new(),
            depth: 0,
        };
        parser.grammar()
    }
}

struct Parser<'t> {
    text: &'t str,
    pos: usize,
    rules: Vec<Rule>,
    names: HashMap<String, usize>,
    /// Where each rule was first named (for "never defined").
    first_use: Vec<usize>,
    defined: Vec<bool>,
    depth: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl Parser<'_> {
    /// The 1-based line and column (in characters) of byte `at`.
    fn line_column(&self, at: usize) -> (usize, usize) {
        let before = &self.text[..at.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[line_start..].chars().count() + 1)
    }

    fn error_at(&self, at: usize, what: impl Into<String>) -> LlmError {
        let (line, column) = self.line_column(at);
        LlmError::Grammar {
            line,
            column,
            what: what.into(),
        }
    }

    fn error(&self, what: impl Into<String>) -> LlmError {
        self.error_at(self.pos, what)
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    /// Skips spaces, tabs and comments, and newlines when `newlines`.
    fn space(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\r' | '\n' if newlines => self.pos += 1,
                '#' => {
                    let end = self.rest().find(['\r', '\n']).unwrap_or(self.rest().len());
                    self.pos += end;
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Result<&str> {
        let start = self.pos;
        let len = self
            .rest()
            .find(|c: char| !is_name_char(c))
            .unwrap_or(self.rest().len());
        if len == 0 {
            return Err(self.error("expected a rule name"));
        }
        self.pos += len;
        Ok(&self.text[start..self.pos])
    }

    /// The id of rule `name`, creating it (undefined) at its first use at `at`.
    fn rule_id(&mut self, name: &str, at: usize) -> usize {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.rules.len();
        self.rules.push(Rule {
            name: name.to_owned(),
            at: (0, 0),
            alts: Vec::new(),
        });
        self.names.insert(name.to_owned(), id);
        self.first_use.push(at);
        self.defined.push(false);
        id
    }

    fn grammar(&mut self) -> Result<Grammar> {
        self.space(true);
        while self.pos < self.text.len() {
            self.rule()?;
        }
        for (id, defined) in self.defined.iter().enumerate() {
            if !defined {
                let name = &self.rules[id].name;
                return Err(self.error_at(
                    self.first_use[id],
                    format!("rule `{name}` is used but never defined"),
                ));
            }
        }
        let Some(&root) = self.names.get("root") else {
            return Err(self.error_at(0, "the grammar has no `root` rule"));
        };
        Ok(Grammar {
            rules: std::mem::take(&mut self.rules),
            root,
        })
    }

    fn rule(&mut self) -> Result<()> {
        let start = self.pos;
        let name = self.name()?.to_owned();
        let id = self.rule_id(&name, start);
        if self.defined[id] {
            return Err(self.error_at(start, format!("rule `{name}` is defined twice")));
        }
        self.space(false);
        if !self.rest().starts_with("::=") {
            return Err(self.error(format!("expected `::=` after the rule name `{name}`")));
        }
        self.pos += 3;
        self.space(true);
        let alts = self.alternatives(false)?;
        match self.peek() {
            None => {}
            Some('\n') => self.pos += 1,
            Some('\r') => {
                self.pos += 1;
                if self.peek() == Some('\n') {
                    self.pos += 1;
                }
            }
            Some(c) => {
                return Err(self.error(format!(
                    "unexpected {c:?}: expected a newline or the end of the grammar"
                )));
            }
        }
        self.rules[id].alts = alts;
        self.rules[id].at = self.line_column(start);
        self.defined[id] = true;
        self.space(true);
        Ok(())
    }

    fn alternatives(&mut self, nested: bool) -> Result<Vec<Vec<Item>>> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(alts)
    }

    fn sequence(&mut self, nested: bool) -> Result<Vec<Item>> {
        let mut items: Vec<Item> = Vec::new();
        loop {
            let start = self.pos;
            let Some(c) = self.peek() else { break };
            let item = match c {
                '"' => self.literal()?,
                '[' => self.class()?,
                '.' => {
                    self.pos += 1;
                    Item::AnyChar
                }
                '<' | '!' => self.token()?,
                '(' => {
                    self.pos += 1;
                    self.depth += 1;
                    if self.depth > MAX_NESTING {
                        return Err(
                            self.error(format!("groups nest deeper than {MAX_NESTING} levels"))
                        );
                    }
                    self.space(true);
                    let alts = self.alternatives(true)?;
                    if self.peek() != Some(')') {
                        return Err(self.error("expected `)` to close the group"));
                    }
                    self.pos += 1;
                    self.depth -= 1;
                    Item::Group(alts)
                }
                '*' | '+' | '?' | '{' => {
                    let Some(last) = items.pop() else {
                        return Err(self.error(format!("`{c}` follows nothing it could repeat")));
                    };
                    let item = self.repetition(last)?;
                    items.push(item);
                    self.space(nested);
                    continue;
                }
                c if is_name_char(c) => {
                    let name = self.name()?.to_owned();
                    Item::RuleRef(self.rule_id(&name, start))
                }
                _ => break,
            };
            items.push(item);
            self.space(nested);
        }
        Ok(items)
    }

    fn repetition(&mut self, item: Item) -> Result<Item> {
        let at = self.pos;
        let c = self.peek().unwrap_or(' ');
        self.pos += 1;
        let (min, max) = match c {
            '*' => (0, None),
            '+' => (1, None),
            '?' => (0, Some(1)),
            _ => {
                self.space(true);
                let min = if self.peek() == Some(',') {
                    0
                } else {
                    self.count()?
                };
                self.space(true);
                let max = match self.peek() {
                    Some('}') => Some(min),
                    Some(',') => {
                        self.pos += 1;
                        self.space(true);
                        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                            Some(self.count()?)
                        } else {
                            None
                        }
                    }
                    _ => return Err(self.error("expected `,` or `}` in a repetition")),
                };
                self.space(true);
                if self.peek() != Some('}') {
                    return Err(self.error("expected `}` to close the repetition"));
                }
                self.pos += 1;
                if let Some(max) = max
                    && max < min
                {
                    return Err(self.error_at(
                        at,
                        format!("repetition {{{min},{max}}}: the most is below the fewest"),
                    ));
                }
                (min, max)
            }
        };
        Ok(Item::Repeat {
            item: Box::new(item),
            min,
            max,
        })
    }

    fn count(&mut self) -> Result<u32> {
        let start = self.pos;
        let len = self
            .rest()
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.rest().len());
        if len == 0 {
            return Err(self.error("expected a number"));
        }
        self.pos += len;
        match self.text[start..self.pos].parse::<u32>() {
            Ok(n) if n <= MAX_REPETITION => Ok(n),
            _ => Err(self.error_at(
                start,
                format!(
                    "repetition count {} is above the limit of {MAX_REPETITION}",
                    &self.text[start..self.pos]
                ),
            )),
        }
    }

    /// One character of a literal or class, with escapes.
    fn char(&mut self) -> Result<u32> {
        let at = self.pos;
        let Some(c) = self.peek() else {
            return Err(self.error("unexpected end of the grammar"));
        };
        self.pos += c.len_utf8();
        if c != '\\' {
            return Ok(c as u32);
        }
        let Some(e) = self.peek() else {
            return Err(self.error("unexpected end of the grammar after `\\`"));
        };
        self.pos += e.len_utf8();
        let hex = |p: &mut Self, digits: usize| -> Result<u32> {
            let s = p.rest().get(..digits).unwrap_or("").to_owned();
            if s.len() != digits || !s.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(p.error(format!("expected {digits} hex digits")));
            }
            p.pos += digits;
            let v = u32::from_str_radix(&s, 16).unwrap_or(u32::MAX);
            if char::from_u32(v).is_none() {
                return Err(p.error_at(at, format!("\\{e}{s} is not a Unicode scalar value")));
            }
            Ok(v)
        };
        match e {
            'n' => Ok('\n' as u32),
            'r' => Ok('\r' as u32),
            't' => Ok('\t' as u32),
            '\\' | '"' | '[' | ']' | '-' => Ok(e as u32),
            'x' => hex(self, 2),
            'u' => hex(self, 4),
            'U' => hex(self, 8),
            _ => Err(self.error_at(at, format!("unknown escape `\\{e}`"))),
        }
    }

    fn literal(&mut self) -> Result<Item> {
        let start = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.peek() {
                None | Some('\n') | Some('\r') => {
                    return Err(self.error_at(start, "unterminated string literal"));
                }
                Some('"') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let c = self.char()?;
                    text.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
            }
        }
        Ok(Item::Literal(text))
    }

    fn class(&mut self) -> Result<Item> {
        let start = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges: Vec<RangeInclusive<u32>> = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error_at(start, "unterminated character class")),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let at = self.pos;
                    let lo = self.char()?;
                    let rest = self.rest();
                    let hi = if rest.starts_with('-') && !rest.starts_with("-]") && rest.len() > 1 {
                        self.pos += 1;
                        self.char()?
                    } else {
                        lo
                    };
                    if hi < lo {
                        return Err(self.error_at(at, "a class range ends below where it starts"));
                    }
                    ranges.push(lo..=hi);
                }
            }
        }
        Ok(Item::Class { ranges, negated })
    }

    fn token(&mut self) -> Result<Item> {
        let negated = self.peek() == Some('!');
        if negated {
            self.pos += 1;
            if self.peek() != Some('<') {
                return Err(self.error("expected `<` after `!` (a token that must not come)"));
            }
        }
        let start = self.pos;
        self.pos += 1;
        let Some(len) = self.rest().find('>') else {
            return Err(self.error_at(start, "unterminated token (`<...>`)"));
        };
        let inner = &self.rest()[..len];
        if inner.contains('\n') || inner.is_empty() {
            return Err(self.error_at(start, "a token is written `<[id]>` or `<text>`"));
        }
        let token = match inner.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(id) => TokenRef::Id(
                id.parse()
                    .map_err(|_| self.error_at(start, format!("`<[{id}]>`: not a token id")))?,
            ),
            None => TokenRef::Text(format!("<{inner}>")),
        };
        self.pos += len + 1;
        Ok(Item::Token { token, negated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> (usize, usize, String) {
        match Grammar::parse(text) {
            Err(LlmError::Grammar { line, column, what }) => (line, column, what),
            other => panic!("{text:?}: expected a grammar error, got {other:?}"),
        }
    }

    #[test]
    fn parses_llama_cpp_json_grammar() {
        let json = include_str!("testdata/json.gbnf");
        let g = Grammar::parse(json).expect("json.gbnf");
        let names: Vec<&str> = g.rule_names().collect();
        assert_eq!(
            names,
            ["root", "object", "value", "array", "string", "number", "ws"]
        );
        assert_eq!(g.rules[g.root].name, "root");
    }

    #[test]
    fn items_escapes_and_repetitions() {
        let g = Grammar::parse(
            "root ::= \"a\\n\\x41\\u00e9\" [^a-c\\]] . <[7]> !<|end|> (x | \"y\")* x{2,} x{,3} x{4}\nx ::= \"x\"",
        )
        .expect("parse");
        let root = &g.rules[g.root];
        assert_eq!(root.alts.len(), 1);
        let seq = &root.alts[0];
        assert_eq!(seq[0], Item::Literal("a\nAé".into()));
        assert_eq!(
            seq[1],
            Item::Class {
                ranges: vec![97..=99, 93..=93],
                negated: true
            }
        );
        assert_eq!(seq[2], Item::AnyChar);
        assert_eq!(
            seq[3],
            Item::Token {
                token: TokenRef::Id(7),
                negated: false
            }
        );
        assert_eq!(
            seq[4],
            Item::Token {
                token: TokenRef::Text("<|end|>".into()),
                negated: true
            }
        );
        assert!(
            matches!(&seq[5], Item::Repeat { min: 0, max: None, item } if matches!(**item, Item::Group(_)))
        );
        assert!(matches!(
            &seq[6],
            Item::Repeat {
                min: 2,
                max: None,
                ..
            }
        ));
        assert!(matches!(
            &seq[7],
            Item::Repeat {
                min: 0,
                max: Some(3),
                ..
            }
        ));
        assert!(matches!(
            &seq[8],
            Item::Repeat {
                min: 4,
                max: Some(4),
                ..
            }
        ));
    }

    #[test]
    fn newlines_inside_groups_and_after_bars() {
        let g = Grammar::parse("root ::= (\n  \"a\"\n  | \"b\"\n) |\n  \"c\"\n\n# done\n")
            .expect("parse");
        assert_eq!(g.rules[g.root].alts.len(), 2);
    }

    #[test]
    fn errors_name_line_and_column() {
        assert_eq!(
            err("root ::= \"a\"\nroot ::= \"b\"\n"),
            (2, 1, "rule `root` is defined twice".into())
        );
        assert_eq!(
            err("root ::= x\n"),
            (1, 10, "rule `x` is used but never defined".into())
        );
        assert_eq!(err("x ::= \"a\"\n").2, "the grammar has no `root` rule");
        assert_eq!(err("root ::= \"abc\n").0, 1);
        assert_eq!(err("root ::= \"abc\n").1, 10);
        assert_eq!(
            err("root ::= [ab\n"),
            (1, 10, "unterminated character class".into())
        );
        assert_eq!(
            err("root ::=\n  \"a\" \\q\n"),
            (
                2,
                7,
                "unexpected '\\\\': expected a newline or the end of the grammar".into()
            )
        );
        assert_eq!(
            err("root ::= \"\\q\"\n"),
            (1, 11, "unknown escape `\\q`".into())
        );
        assert_eq!(
            err("root = \"a\"\n").2,
            "expected `::=` after the rule name `root`"
        );
        assert_eq!(
            err("root ::= * \"a\"\n").2,
            "`*` follows nothing it could repeat"
        );
        assert_eq!(
            err("root ::= (\"a\"\n").2,
            "expected `)` to close the group"
        );
        assert!(err("root ::= \"a\"{3,2}\n").2.contains("below the fewest"));
        assert!(err("root ::= \"a\"{20000}\n").2.contains("above the limit"));
        assert!(err("root ::= \"\\u12\"\n").2.contains("4 hex digits"));
        assert!(
            err("root ::= \"\\uD800\"\n")
                .2
                .contains("not a Unicode scalar")
        );
        assert_eq!(err("root ::= é\n").1, 10);
    }
}
