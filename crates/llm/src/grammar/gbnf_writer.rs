//! `GbnfWriter`: builds GBNF text rule by rule (the JSON-schema converter and the
//! tool-call grammars write grammars this way), with names made unique and rules with
//! the same body written once.

use std::collections::HashMap;
use std::fmt::Write;

/// GBNF text under construction.
#[derive(Debug, Default)]
pub(crate) struct GbnfWriter {
    rules: Vec<(String, String)>,
    by_body: HashMap<String, String>,
    taken: HashMap<String, usize>,
}

/// A rule name made of `hint`: letters and digits kept, everything else `-`.
fn sanitize(hint: &str) -> String {
    let mut name: String = hint
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name.trim_matches('-');
    if name.is_empty() {
        "r".to_owned()
    } else {
        name.to_owned()
    }
}

impl GbnfWriter {
    /// A name for a rule from `hint`, not yet taken.
    pub(crate) fn reserve(&mut self, hint: &str) -> String {
        let base = sanitize(hint);
        let n = self.taken.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 { base } else { format!("{base}-{n}") }
    }

    /// Defines the rule `name` (from [`GbnfWriter::reserve`]) as `body`.
    pub(crate) fn define(&mut self, name: &str, body: String) {
        self.by_body
            .entry(body.clone())
            .or_insert_with(|| name.to_owned());
        self.rules.push((name.to_owned(), body));
    }

    /// A rule named after `hint` with `body`; an existing rule with the same body is
    /// reused. Returns its name.
    pub(crate) fn rule(&mut self, hint: &str, body: String) -> String {
        if let Some(name) = self.by_body.get(&body) {
            return name.clone();
        }
        let name = self.reserve(hint);
        self.define(&name, body);
        name
    }

    /// A fixed rule (`space`, `string`, ...) defined once under exactly `name`.
    pub(crate) fn fixed(&mut self, name: &str, body: &str) -> String {
        if !self.taken.contains_key(name) {
            self.taken.insert(name.to_owned(), 1);
            self.rules.push((name.to_owned(), body.to_owned()));
        }
        name.to_owned()
    }

    /// Whether a rule is named `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.taken.contains_key(name)
    }

    /// The grammar text, `root` first.
    pub(crate) fn finish(self) -> String {
        let mut out = String::new();
        let (root, rest): (Vec<_>, Vec<_>) = self.rules.into_iter().partition(|(n, _)| n == "root");
        for (name, body) in root.into_iter().chain(rest) {
            let _ = writeln!(out, "{name} ::= {body}");
        }
        out
    }
}

/// A rule for any text that does not contain `stop`, followed by `stop` (built from the
/// prefix automaton of `stop`: one rule per matched prefix length). Returns its name.
pub(crate) fn text_until(w: &mut GbnfWriter, stop: &str, hint: &str) -> String {
    let chars: Vec<char> = stop.chars().collect();
    let n = chars.len();
    // next[k][c]: the matched length after reading `c` with `k` matched.
    let step = |k: usize, c: char| -> usize {
        let mut probe: Vec<char> = chars[..k].to_vec();
        probe.push(c);
        (0..=probe.len().min(n))
            .rev()
            .find(|&len| probe[probe.len() - len..] == chars[..len])
            .unwrap_or(0)
    };
    let names: Vec<String> = (0..n).map(|k| w.reserve(&format!("{hint}-{k}"))).collect();
    let mut alphabet: Vec<char> = chars.clone();
    alphabet.sort_unstable();
    alphabet.dedup();
    for k in 0..n {
        let mut alts = Vec::new();
        for &c in &alphabet {
            let to = step(k, c);
            let target = if to == n {
                String::new()
            } else {
                names[to].clone()
            };
            alts.push(
                format!("{} {target}", literal(&c.to_string()))
                    .trim_end()
                    .to_owned(),
            );
        }
        let others: Vec<(u32, u32)> = alphabet.iter().map(|&c| (c as u32, c as u32)).collect();
        alts.push(format!("{} {}", class(&others, true), names[0]));
        w.define(&names[k], alts.join(" | "));
    }
    names[0].clone()
}

/// `text` as a GBNF string literal (quoted, escaped).
pub(crate) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        escape_into(c, &mut out, false);
    }
    out.push('"');
    out
}

/// Appends character `c` escaped for a GBNF literal (`in_class`: for a `[...]` class).
pub(crate) fn escape_into(c: char, out: &mut String, in_class: bool) {
    match c {
        '"' if !in_class => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        ']' | '[' | '-' | '^' if in_class => {
            if c == '^' {
                out.push_str("\\x5E");
            } else {
                out.push('\\');
                out.push(c);
            }
        }
        c if (c as u32) < 0x20 || c as u32 == 0x7F => {
            let _ = write!(out, "\\x{:02X}", c as u32);
        }
        c => out.push(c),
    }
}

/// A GBNF class of the code point `ranges` (`[...]`), negated with `[^...]`.
pub(crate) fn class(ranges: &[(u32, u32)], negated: bool) -> String {
    let mut out = String::from("[");
    if negated {
        out.push('^');
    }
    let push = |c: u32, out: &mut String| match char::from_u32(c) {
        Some(ch) => escape_into(ch, out, true),
        None => {
            let _ = write!(out, "\\U{c:08X}");
        }
    };
    for &(a, b) in ranges {
        push(a, &mut out);
        if b > a {
            out.push('-');
            push(b, &mut out);
        }
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;

    #[test]
    fn literals_and_classes_parse_back() {
        let text = "a\"b\\c\n\t\u{1}é]-^";
        let mut w = GbnfWriter::default();
        let lit = w.rule("x y!", literal(text));
        assert_eq!(lit, "x-y");
        let cls = w.rule(
            "x y!",
            class(
                &[(0x22, 0x22), (0x5B, 0x5E), (0x2D, 0x2D), (0x1F600, 0x1F64F)],
                true,
            ),
        );
        assert_eq!(cls, "x-y-2");
        assert_eq!(w.rule("other", literal(text)), "x-y");
        w.define("root", format!("{lit} {cls}"));
        let g = Grammar::parse(&w.finish()).expect("parses");
        assert_eq!(g.rule_count(), 3);
    }
}
