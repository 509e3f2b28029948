//! A small backtracking matcher for the pre-tokenizer regular expressions.
//!
//! The pre-tokenizer regexes of GPT-2, Llama 3, Qwen2, Tekken, DeepSeek and friends are
//! top-level alternations of short sequences: character classes under greedy
//! quantifiers (`?`, `*`, `+`, `{m,n}`), an English-contraction group, a negative
//! lookahead `(?!\S)` and the end anchor `$`. A [`Pattern`] spells such a regex as data
//! and [`Pattern::match_at`] gives exactly the match a backtracking engine (Oniguruma in
//! Hugging Face `tokenizers`, PCRE, `fancy-regex`) finds at a position: alternatives are
//! tried in order, each quantifier takes as much as it can and gives back one character
//! at a time until the rest of its sequence matches. Nothing is allocated.

/// A character class: a predicate over one character.
pub(crate) type CharClass = fn(char) -> bool;

/// One element of a [`Pattern`] sequence.
#[derive(Clone, Copy)]
pub(crate) enum Node {
    /// `class{min,max}`, greedy (`max = u32::MAX` for unbounded).
    Repeat {
        /// The class.
        class: CharClass,
        /// Fewest characters.
        min: u32,
        /// Most characters.
        max: u32,
    },
    /// `'s|'t|'re|'ve|'m|'ll|'d`, case-insensitive when `ignore_case` (the `(?i:...)`
    /// form, where `s` also matches `ſ` (U+017F) by Unicode case folding).
    Contraction {
        /// Whether the letters match case-insensitively.
        ignore_case: bool,
    },
    /// `(?!class)`: the next character, if there is one, is not in `class`.
    NotFollowedBy(CharClass),
    /// `$`: the end of the piece being split.
    End,
}

/// `class?`.
pub(crate) const fn opt(class: CharClass) -> Node {
    Node::Repeat {
        class,
        min: 0,
        max: 1,
    }
}

/// `class*`.
pub(crate) const fn star(class: CharClass) -> Node {
    Node::Repeat {
        class,
        min: 0,
        max: u32::MAX,
    }
}

/// `class+`.
pub(crate) const fn plus(class: CharClass) -> Node {
    Node::Repeat {
        class,
        min: 1,
        max: u32::MAX,
    }
}

/// `class` (exactly one).
pub(crate) const fn one(class: CharClass) -> Node {
    Node::Repeat {
        class,
        min: 1,
        max: 1,
    }
}

/// `class{min,max}`.
pub(crate) const fn range(class: CharClass, min: u32, max: u32) -> Node {
    Node::Repeat { class, min, max }
}

/// A regex as a top-level alternation of node sequences.
#[derive(Clone, Copy)]
pub(crate) struct Pattern(pub(crate) &'static [&'static [Node]]);

impl Pattern {
    /// The end (byte offset into `piece`) of the match starting at `pos`, if the regex
    /// matches there: the first alternative that matches wins.
    pub(crate) fn match_at(&self, piece: &str, pos: usize) -> Option<usize> {
        self.0.iter().find_map(|alt| match_seq(alt, piece, pos))
    }

    /// Splits `text[start..end]` into the regex's matches and the gaps between them
    /// (Hugging Face's `Split` with the `Isolated` behaviour), calling `emit` with each
    /// non-empty piece's byte range in order.
    pub(crate) fn split(
        &self,
        text: &str,
        start: usize,
        end: usize,
        emit: &mut dyn FnMut(usize, usize),
    ) {
        let piece = &text[start..end];
        if let [
            [
                Node::Repeat {
                    class,
                    min: 1,
                    max: u32::MAX,
                },
                Node::End,
            ],
        ] = self.0
        {
            // `class+$` matches only the piece's trailing run of `class` (found directly:
            // trying every position would rescan the run from each, quadratically).
            let run = piece.len() - piece.trim_end_matches(*class).len();
            let cut = piece.len() - run;
            if cut > 0 {
                emit(start, start + cut);
            }
            if run > 0 {
                emit(start + cut, end);
            }
            return;
        }
        let mut pos = 0;
        let mut gap = 0;
        while pos < piece.len() {
            match self.match_at(piece, pos) {
                Some(m) if m > pos => {
                    if gap < pos {
                        emit(start + gap, start + pos);
                    }
                    emit(start + pos, start + m);
                    pos = m;
                    gap = m;
                }
                _ => pos += char_len_at(piece, pos),
            }
        }
        if gap < piece.len() {
            emit(start + gap, end);
        }
    }
}

/// The UTF-8 length of the character starting at byte `pos` of `s`.
fn char_len_at(s: &str, pos: usize) -> usize {
    s[pos..].chars().next().map_or(1, char::len_utf8)
}

fn match_seq(nodes: &[Node], s: &str, pos: usize) -> Option<usize> {
    let Some((node, rest)) = nodes.split_first() else {
        return Some(pos);
    };
    match *node {
        Node::Repeat { class, min, max } => {
            let mut end = pos;
            let mut count = 0u32;
            for c in s[pos..].chars() {
                if count == max || !class(c) {
                    break;
                }
                end += c.len_utf8();
                count += 1;
            }
            if count < min {
                return None;
            }
            if let Some(Node::End) = rest.first() {
                // Giving characters back can only move away from the end.
                return if end == s.len() {
                    match_seq(rest, s, end)
                } else {
                    None
                };
            }
            loop {
                if let Some(m) = match_seq(rest, s, end) {
                    return Some(m);
                }
                if count == min {
                    return None;
                }
                // Give back one character.
                end -= s[..end].chars().next_back().map_or(1, char::len_utf8);
                count -= 1;
            }
        }
        Node::Contraction { ignore_case } => {
            let tail = s[pos..].strip_prefix('\'')?;
            let len = contraction_len(tail, ignore_case)?;
            match_seq(rest, s, pos + 1 + len)
        }
        Node::NotFollowedBy(class) => match s[pos..].chars().next() {
            Some(c) if class(c) => None,
            _ => match_seq(rest, s, pos),
        },
        Node::End => {
            if pos == s.len() {
                match_seq(rest, s, pos)
            } else {
                None
            }
        }
    }
}

/// The byte length of the contraction suffix (`s`, `t`, `re`, `ve`, `m`, `ll`, `d`) at
/// the start of `tail`, trying the alternatives in the regex's order.
fn contraction_len(tail: &str, ignore_case: bool) -> Option<usize> {
    let mut chars = tail.chars();
    let c0 = chars.next()?;
    let c1 = chars.next();
    let is = |c: char, lower: char| {
        if ignore_case {
            c.to_ascii_lowercase() == lower || (lower == 's' && c == 'ſ')
        } else {
            c == lower
        }
    };
    let two = |a: char, b: char| is(c0, a) && c1.is_some_and(|c| is(c, b));
    if is(c0, 's') {
        Some(c0.len_utf8())
    } else if is(c0, 't') {
        Some(1)
    } else if two('r', 'e') || two('v', 'e') || two('l', 'l') {
        Some(2)
    } else if is(c0, 'm') || is(c0, 'd') {
        Some(1)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::char_class::*;

    const GPT2: Pattern = Pattern(&[
        &[Node::Contraction { ignore_case: false }],
        &[opt(is_space), plus(is_letter)],
        &[opt(is_space), plus(is_number)],
        &[opt(is_space), plus(is_not_space_letter_number)],
        &[plus(is_whitespace), Node::NotFollowedBy(is_not_whitespace)],
        &[plus(is_whitespace)],
    ]);

    fn pieces(p: &Pattern, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        p.split(text, 0, text.len(), &mut |a, b| {
            out.push(text[a..b].to_string())
        });
        out
    }

    #[test]
    fn gpt2_splits() {
        assert_eq!(
            pieces(&GPT2, "Hello world's  3 x!"),
            ["Hello", " world", "'s", " ", " 3", " x", "!"]
        );
        assert_eq!(pieces(&GPT2, "a   \n\nb"), ["a", "   \n", "\n", "b"]);
        assert_eq!(pieces(&GPT2, "   "), ["   "]);
        assert_eq!(pieces(&GPT2, ""), Vec::<String>::new());
    }

    #[test]
    fn backtracking_gives_back_characters() {
        // \s*[\r\n]+ takes whitespace up to and including the last newline.
        const P: Pattern = Pattern(&[
            &[star(is_whitespace), plus(is_cr_or_lf)],
            &[plus(is_whitespace)],
        ]);
        assert_eq!(pieces(&P, " \n \n  x"), [" \n \n", "  ", "x"]);
        // [U]*[l]+ backtracks into the upper run when the last character is in both.
        const T: Pattern = Pattern(&[&[star(is_upper_run), plus(is_lower_run)]]);
        assert_eq!(T.match_at("AB中C", 0), Some("AB中".len()));
    }

    #[test]
    fn end_anchor_after_a_long_run_is_linear() {
        const P: Pattern = Pattern(&[&[plus(is_whitespace), Node::End]]);
        let text = format!("{}x", " ".repeat(200_000));
        let mut pieces = 0;
        P.split(&text, 0, text.len(), &mut |_, _| pieces += 1);
        assert_eq!(pieces, 1);
        assert_eq!(P.match_at("  ", 0), Some(2));
    }

    #[test]
    fn contractions() {
        assert_eq!(contraction_len("s", false), Some(1));
        assert_eq!(contraction_len("S", false), None);
        assert_eq!(contraction_len("S", true), Some(1));
        assert_eq!(contraction_len("LL", true), Some(2));
        assert_eq!(contraction_len("ſ", true), Some(2));
        assert_eq!(contraction_len("x", true), None);
    }
}
