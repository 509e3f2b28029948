//! A JSON schema `pattern` (an ECMA-262 regular expression) as grammar over the
//! *JSON-encoded* content of a string: a character the pattern matches is written as
//! JSON writes it (`"` as `\"`, a newline as `\n`, other control characters as
//! `\u00XX`).
//!
//! Supported: literals and escapes (`\d \w \s \D \W \S`, `\n \t \r \f \v \0`, `\xHH`,
//! `\uHHHH`, escaped punctuation), classes with ranges and negation, `.`, groups
//! (`(...)`, `(?:...)`), alternation, the quantifiers `* + ? {n} {n,} {n,m}` (lazy
//! forms match the same strings), and `^`/`$` at the ends. A pattern without `^` (or
//! `$`) may have anything before (after) its match, as JSON Schema says. Back
//! references, lookaround, word boundaries and named groups are refused.

use std::fmt::Write;

use crate::grammar::gbnf;
use crate::grammar::gbnf_writer::{class, literal};
use crate::grammar::utf8;

/// Code point ranges, normalized (sorted, merged, no surrogates).
type Set = Vec<(u32, u32)>;

fn set(ranges: &[(u32, u32)], negated: bool) -> Set {
    let r: Vec<_> = ranges.iter().map(|&(a, b)| a..=b).collect();
    utf8::normalize(&r, negated)
        .into_iter()
        .map(|r| (*r.start(), *r.end()))
        .collect()
}

const DIGIT: &[(u32, u32)] = &[(0x30, 0x39)];
const WORD: &[(u32, u32)] = &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];
const SPACE: &[(u32, u32)] = &[
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
];
/// What `.` matches: everything but line terminators.
const DOT_EXCLUDES: &[(u32, u32)] = &[(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)];

/// The grammar of one JSON string character of `s` (as JSON writes it).
pub(crate) fn json_chars(s: &[(u32, u32)]) -> String {
    let mut alts = Vec::new();
    // Written as they are: everything but `"`, `\` and control characters.
    let raw: Set = s
        .iter()
        .flat_map(|&(a, b)| {
            let mut pieces = Vec::new();
            let mut lo = a.max(0x20);
            for cut in [0x22u32, 0x5C] {
                if lo <= b && lo <= cut && cut <= b {
                    if lo < cut {
                        pieces.push((lo, cut - 1));
                    }
                    lo = cut + 1;
                }
            }
            if lo <= b {
                pieces.push((lo, b));
            }
            pieces
        })
        .collect();
    if !raw.is_empty() {
        alts.push(class(&raw, false));
    }
    let contains = |c: u32| s.iter().any(|&(a, b)| a <= c && c <= b);
    for (c, esc) in [(0x22, "\\\""), (0x5C, "\\\\")] {
        if contains(c) {
            alts.push(literal(esc));
        }
    }
    for c in 0..0x20u32 {
        if !contains(c) {
            continue;
        }
        let esc = match c {
            0x08 => "\\b".to_owned(),
            0x09 => "\\t".to_owned(),
            0x0A => "\\n".to_owned(),
            0x0C => "\\f".to_owned(),
            0x0D => "\\r".to_owned(),
            _ => format!("\\u{c:04x}"),
        };
        alts.push(literal(&esc));
    }
    match alts.len() {
        0 => "\"\"".to_owned(),
        1 => alts.pop().unwrap_or_default(),
        _ => format!("({})", alts.join(" | ")),
    }
}

/// Any JSON string character.
pub(crate) fn any_json_char() -> String {
    json_chars(&set(&[(0, utf8::MAX_CHAR)], false))
}

struct Parser<'p> {
    chars: Vec<char>,
    pos: usize,
    pattern: &'p str,
}

/// The grammar (a GBNF expression) of JSON string contents matching `pattern`, or what
/// in it is not supported.
pub(crate) fn pattern_grammar(pattern: &str) -> Result<String, String> {
    let mut p = Parser {
        chars: pattern.chars().collect(),
        pos: 0,
        pattern,
    };
    let anchored_start = p.chars.first() == Some(&'^');
    if anchored_start {
        p.pos = 1;
    }
    let mut end = p.chars.len();
    let anchored_end = end > p.pos && p.chars[end - 1] == '$' && !escaped(&p.chars, end - 1);
    if anchored_end {
        end -= 1;
    }
    p.chars.truncate(end);
    let body = p.alternatives(0)?;
    if p.pos < p.chars.len() {
        return Err(format!(
            "unexpected `{}` at character {} of the pattern",
            p.chars[p.pos],
            p.pos + 1
        ));
    }
    let any = format!("{}*", any_json_char());
    let mut out = String::new();
    if !anchored_start {
        let _ = write!(out, "{any} ");
    }
    let _ = write!(out, "({body})");
    if !anchored_end {
        let _ = write!(out, " {any}");
    }
    Ok(out)
}

/// Whether the character at `i` is escaped by an odd run of backslashes before it.
fn escaped(chars: &[char], i: usize) -> bool {
    chars[..i].iter().rev().take_while(|&&c| c == '\\').count() % 2 == 1
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!(
            "{what} (at character {} of {:?}) is not supported",
            self.pos + 1,
            self.pattern
        ))
    }

    fn alternatives(&mut self, depth: usize) -> Result<String, String> {
        if depth > 32 {
            return self.fail("groups nested deeper than 32");
        }
        let mut alts = vec![self.sequence(depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.sequence(depth)?);
        }
        Ok(alts.join(" | "))
    }

    fn sequence(&mut self, depth: usize) -> Result<String, String> {
        let mut items: Vec<String> = Vec::new();
        while let Some(c) = self.peek() {
            let item = match c {
                '|' | ')' => break,
                '(' => {
                    self.pos += 1;
                    if self.peek() == Some('?') {
                        if self.chars.get(self.pos + 1) == Some(&':') {
                            self.pos += 2;
                        } else {
                            return self.fail("lookaround or a named group `(?`");
                        }
                    }
                    let inner = self.alternatives(depth + 1)?;
                    if self.peek() != Some(')') {
                        return Err(format!("unclosed group in {:?}", self.pattern));
                    }
                    self.pos += 1;
                    format!("({inner})")
                }
                '[' => {
                    self.pos += 1;
                    let s = self.class()?;
                    json_chars(&s)
                }
                '.' => {
                    self.pos += 1;
                    json_chars(&set(DOT_EXCLUDES, true))
                }
                '\\' => {
                    self.pos += 1;
                    let s = self.escape(false)?;
                    json_chars(&s)
                }
                '^' | '$' => return self.fail("an anchor inside the pattern"),
                '*' | '+' | '?' | '{' => return self.fail("a quantifier with nothing before it"),
                c => {
                    self.pos += 1;
                    json_chars(&[(c as u32, c as u32)])
                }
            };
            let item = self.quantifier(item)?;
            items.push(item);
        }
        Ok(if items.is_empty() {
            "\"\"".to_owned()
        } else {
            items.join(" ")
        })
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }

    fn quantifier(&mut self, item: String) -> Result<String, String> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let save = self.pos;
                self.pos += 1;
                let min = self.number();
                let (min, max) = match (min, self.peek()) {
                    (Some(m), Some('}')) => (m, Some(m)),
                    (Some(m), Some(',')) => {
                        self.pos += 1;
                        (m, self.number())
                    }
                    _ => {
                        // Not a quantifier: a literal `{`.
                        self.pos = save;
                        return Ok(item);
                    }
                };
                if self.peek() != Some('}') {
                    self.pos = save;
                    return Ok(item);
                }
                if min > gbnf::MAX_REPETITION || max.is_some_and(|m| m > gbnf::MAX_REPETITION) {
                    return self.fail("a repetition count above 10000");
                }
                if max.is_some_and(|m| m < min) {
                    return Err(format!(
                        "a repetition {{{min},..}} whose most is below its fewest in {:?}",
                        self.pattern
                    ));
                }
                (min, max)
            }
            _ => return Ok(item),
        };
        self.pos += 1;
        if self.peek() == Some('?') {
            // Lazy: the same strings.
            self.pos += 1;
        }
        let item = format!("({item})");
        Ok(match (min, max) {
            (0, None) => format!("{item}*"),
            (1, None) => format!("{item}+"),
            (0, Some(1)) => format!("{item}?"),
            (m, None) => format!("{item}{{{m},}}"),
            (m, Some(n)) if m == n => format!("{item}{{{m}}}"),
            (m, Some(n)) => format!("{item}{{{m},{n}}}"),
        })
    }

    /// After a backslash: the set of characters the escape stands for.
    fn escape(&mut self, in_class: bool) -> Result<Set, String> {
        let Some(c) = self.peek() else {
            return Err(format!("a trailing backslash in {:?}", self.pattern));
        };
        self.pos += 1;
        let one = |c: u32| Ok(vec![(c, c)]);
        match c {
            'd' => Ok(set(DIGIT, false)),
            'D' => Ok(set(DIGIT, true)),
            'w' => Ok(set(WORD, false)),
            'W' => Ok(set(WORD, true)),
            's' => Ok(set(SPACE, false)),
            'S' => Ok(set(SPACE, true)),
            'n' => one(0x0A),
            't' => one(0x09),
            'r' => one(0x0D),
            'f' => one(0x0C),
            'v' => one(0x0B),
            '0' => one(0),
            'b' if in_class => one(0x08),
            'x' | 'u' => {
                let n = if c == 'x' { 2 } else { 4 };
                let hex: String = self.chars[self.pos..].iter().take(n).collect();
                match u32::from_str_radix(&hex, 16) {
                    Ok(v) if hex.len() == n => {
                        self.pos += n;
                        one(v)
                    }
                    _ => Err(format!(
                        "`\\{c}` needs {n} hex digits in {:?}",
                        self.pattern
                    )),
                }
            }
            c if c.is_ascii_alphanumeric() => {
                self.pos -= 1;
                self.fail(&format!("the escape `\\{c}`"))
            }
            c => one(c as u32),
        }
    }

    /// After `[`: the class's set.
    fn class(&mut self) -> Result<Set, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("an unclosed `[` in {:?}", self.pattern));
            };
            if c == ']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            self.pos += 1;
            let lo = if c == '\\' {
                let s = self.escape(true)?;
                if s.len() != 1 || s[0].0 != s[0].1 {
                    ranges.extend(s);
                    continue;
                }
                s[0].0
            } else {
                c as u32
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let c = self.peek().unwrap_or(']');
                self.pos += 1;
                let hi = if c == '\\' {
                    let s = self.escape(true)?;
                    if s.len() != 1 || s[0].0 != s[0].1 {
                        return self.fail("a class range ending in a class escape");
                    }
                    s[0].0
                } else {
                    c as u32
                };
                if hi < lo {
                    return Err(format!("a class range out of order in {:?}", self.pattern));
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(set(&ranges, negated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::test_vocab::byte_vocab;
    use crate::grammar::{Grammar, GrammarConstraint, TokenTrie};
    use std::sync::Arc;

    fn accepts(pattern: &str, json_content: &str) -> bool {
        let expr = pattern_grammar(pattern).expect("supported");
        let trie = Arc::new(TokenTrie::new(&byte_vocab(&[]), &[]));
        let g = Grammar::parse(&format!("root ::= {expr}\n")).expect("parses");
        let mut c = GrammarConstraint::new(&g, trie).expect("constraint");
        c.accept_bytes(json_content.as_bytes()).expect("step") && c.is_complete()
    }

    #[test]
    fn patterns_match_json_encoded_content() {
        assert!(accepts("^[A-Z]{2}-\\d{3}$", "AB-123"));
        assert!(!accepts("^[A-Z]{2}-\\d{3}$", "AB-12"));
        assert!(!accepts("^[A-Z]{2}-\\d{3}$", "xAB-123"));
        assert!(accepts("[A-Z]{2}-\\d{3}", "xAB-123 tail"));
        assert!(accepts("^(cat|dog)s?$", "dogs"));
        assert!(!accepts("^(?:cat|dog)s?$", "cow"));
        // A quote in the pattern is `\"` in JSON; a newline is `\n`.
        assert!(accepts("^a\"b\\nc$", "a\\\"b\\nc"));
        assert!(!accepts("^a\"b$", "a\"b"));
        assert!(accepts("^[^a-z]+$", "Q\\\\9"));
        assert!(accepts("^.+$", "\\u0001x"));
        assert!(!accepts("^.$", "\\n"));
        assert!(accepts("^\\w+@\\w+\\.com$", "me@site.com"));
        assert!(accepts("^a{2,}?b$", "aaab"));
    }

    #[test]
    fn unsupported_features_are_named() {
        for p in ["(?=a)", "\\1", "a\\bb", "^a$b$", "(?<n>a)"] {
            let err = pattern_grammar(p).expect_err(p);
            assert!(
                err.contains("not supported") || err.contains("anchor"),
                "{p}: {err}"
            );
        }
        assert!(pattern_grammar("(a").unwrap_err().contains("unclosed"));
    }
}
