//! Bounded numbers as grammar: the decimal spellings of the integers in a range (split
//! by digit count and by leading digit, so that every string the grammar allows is in
//! range and every number in range has its one spelling), and the JSON numbers between
//! whole-number bounds.

/// The most digits an integer's spelling may have (JSON numbers a double holds exactly
/// and every common parser reads as an integer).
pub(crate) const MAX_DIGITS: u32 = 16;

/// A fraction: `.` and one to sixteen digits.
const FRACTION: &str = "(\".\" [0-9]{1,16})";
/// A fraction that is not zero.
const NONZERO_FRACTION: &str = "(\".\" [0-9]{0,15} [1-9] [0-9]{0,15})";
/// A fraction of zeros.
const ZERO_FRACTION: &str = "(\".\" \"0\"{1,16})";

fn pow10(k: u32) -> u64 {
    10u64.saturating_pow(k)
}

fn digits(n: u64) -> u32 {
    n.checked_ilog10().map_or(1, |d| d + 1)
}

/// The spellings (no sign, no leading zeros) of the integers in `lo..=hi`
/// (`hi: None`: up to [`MAX_DIGITS`] digits), as a GBNF expression; `None` when the
/// range is empty.
pub(crate) fn nonneg_int(lo: u64, hi: Option<u64>) -> Option<String> {
    let cap = pow10(MAX_DIGITS) - 1;
    let hi = hi.unwrap_or(cap).min(cap);
    if lo > hi {
        return None;
    }
    let mut alts = Vec::new();
    for k in digits(lo)..=digits(hi) {
        let first = if k == 1 { 0 } else { pow10(k - 1) };
        let a = lo.max(first);
        let b = hi.min(pow10(k) - 1);
        if a <= b {
            alts.push(same_length(&a.to_string(), &b.to_string()));
        }
    }
    Some(join(alts))
}

fn join(alts: Vec<String>) -> String {
    match alts.len() {
        1 => alts.into_iter().next().unwrap_or_default(),
        _ => format!("({})", alts.join(" | ")),
    }
}

fn digit_class(a: u8, b: u8) -> String {
    if a == b {
        format!("\"{}\"", a as char)
    } else {
        format!("[{}-{}]", a as char, b as char)
    }
}

fn any_digits(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => "[0-9]".into(),
        n => format!("[0-9]{{{n}}}"),
    }
}

/// Digit strings of one length from `a` to `b` (same length, `a <= b`).
fn same_length(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.is_empty() {
        return String::new();
    }
    let rest = a.len() - 1;
    if a[0] == b[0] {
        let tail = same_length(
            std::str::from_utf8(&a[1..]).unwrap_or(""),
            std::str::from_utf8(&b[1..]).unwrap_or(""),
        );
        return format!("{} {}", digit_class(a[0], a[0]), tail)
            .trim_end()
            .to_owned();
    }
    let a_low = a[1..].iter().all(|&d| d == b'0');
    let b_high = b[1..].iter().all(|&d| d == b'9');
    let mut alts = Vec::new();
    let mid_lo = if a_low { a[0] } else { a[0] + 1 };
    let mid_hi = if b_high { b[0] } else { b[0] - 1 };
    if !a_low {
        let nines = "9".repeat(rest);
        let tail = same_length(std::str::from_utf8(&a[1..]).unwrap_or(""), &nines);
        alts.push(
            format!("{} {}", digit_class(a[0], a[0]), tail)
                .trim_end()
                .to_owned(),
        );
    }
    if mid_lo <= mid_hi {
        alts.push(
            format!("{} {}", digit_class(mid_lo, mid_hi), any_digits(rest))
                .trim_end()
                .to_owned(),
        );
    }
    if !b_high {
        let zeros = "0".repeat(rest);
        let tail = same_length(&zeros, std::str::from_utf8(&b[1..]).unwrap_or(""));
        alts.push(
            format!("{} {}", digit_class(b[0], b[0]), tail)
                .trim_end()
                .to_owned(),
        );
    }
    join(alts)
}

/// The spellings of the integers in `lo..=hi` (either end open), as a GBNF expression;
/// `None` when the range is empty.
pub(crate) fn int_range(lo: Option<i64>, hi: Option<i64>) -> Option<String> {
    let mut alts = Vec::new();
    if hi.is_none_or(|h| h >= 0) {
        let a = lo.map_or(0, |l| l.max(0) as u64);
        alts.extend(nonneg_int(a, hi.map(|h| h as u64)));
    }
    if lo.is_none_or(|l| l < 0) {
        // -m with m in max(1, -hi)..=-lo.
        let m_lo = hi.map_or(1, |h| if h < 0 { h.unsigned_abs() } else { 1 });
        let m_hi = lo.map(i64::unsigned_abs);
        if let Some(m) = nonneg_int(m_lo, m_hi) {
            alts.push(format!("\"-\" {m}"));
        }
    }
    (!alts.is_empty()).then(|| join(alts))
}

/// One end of a number range: a whole number, exclusive or not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Bound {
    pub(crate) value: i64,
    pub(crate) exclusive: bool,
}

/// Magnitudes (no sign) from `lo` to `hi` (`None`: unbounded), with fractions.
fn magnitude(lo: Bound, hi: Option<Bound>) -> Option<String> {
    let a = lo.value.max(0) as u64;
    let mut alts = Vec::new();
    match hi {
        Some(h) if (h.value as u64) == a => {
            if !lo.exclusive && !h.exclusive {
                alts.push(format!("\"{a}\" {ZERO_FRACTION}?"));
            }
        }
        Some(h) if (h.value as u64) < a => {}
        _ => {
            let frac = if lo.exclusive {
                NONZERO_FRACTION.to_owned()
            } else {
                format!("{FRACTION}?")
            };
            alts.push(format!("\"{a}\" {frac}"));
            let inner_hi = hi.map(|h| (h.value as u64).saturating_sub(1));
            if let Some(m) = nonneg_int(a + 1, inner_hi) {
                alts.push(format!("{m} {FRACTION}?"));
            }
            if let Some(h) = hi
                && !h.exclusive
            {
                alts.push(format!("\"{}\" {ZERO_FRACTION}?", h.value));
            }
        }
    }
    (!alts.is_empty()).then(|| join(alts))
}

/// The JSON numbers (no exponent) between whole-number bounds, as a GBNF expression;
/// `None` when none is.
pub(crate) fn number_range(lo: Option<Bound>, hi: Option<Bound>) -> Option<String> {
    let mut alts = Vec::new();
    // x >= 0.
    if hi.is_none_or(|h| h.value > 0 || (h.value == 0 && !h.exclusive)) {
        let from = match lo {
            Some(l) if l.value >= 0 => l,
            _ => Bound {
                value: 0,
                exclusive: false,
            },
        };
        alts.extend(magnitude(from, hi));
    }
    // x = -m < 0: m > 0, m >= -hi (when hi < 0), m <= -lo.
    if lo.is_none_or(|l| l.value < 0) {
        let from = match hi {
            Some(h) if h.value < 0 => Bound {
                value: -h.value,
                exclusive: h.exclusive,
            },
            _ => Bound {
                value: 0,
                exclusive: true,
            },
        };
        let to = lo.map(|l| Bound {
            value: -l.value,
            exclusive: l.exclusive,
        });
        if let Some(m) = magnitude(from, to) {
            alts.push(format!("\"-\" {m}"));
        }
    }
    (!alts.is_empty()).then(|| join(alts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::test_vocab::byte_vocab;
    use crate::grammar::{Grammar, GrammarConstraint, TokenTrie};
    use std::sync::Arc;

    fn checker(expr: &str) -> impl FnMut(&str) -> bool {
        let trie = Arc::new(TokenTrie::new(&byte_vocab(&[]), &[]));
        let text = format!("root ::= {expr}\n");
        let grammar = Grammar::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        move |s: &str| {
            let mut c = GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("constraint");
            c.accept_bytes(s.as_bytes()).expect("step") && c.is_complete()
        }
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [
            (Some(0), Some(0)),
            (Some(-5), Some(5)),
            (Some(7), Some(1234)),
            (Some(-1234), Some(-7)),
            (Some(10), None),
            (None, Some(-3)),
            (Some(99), Some(101)),
            (Some(100), Some(199)),
        ] {
            let expr = int_range(lo, hi).expect("nonempty");
            let mut accepts = checker(&expr);
            for x in -1500i64..=1500 {
                let want = lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
                assert_eq!(
                    accepts(&x.to_string()),
                    want,
                    "{x} in {lo:?}..={hi:?}: {expr}"
                );
            }
            for bad in ["007", "-0", "01", "", "-", "1.0"] {
                assert!(!accepts(bad), "{bad:?} in {lo:?}..={hi:?}");
            }
        }
        assert_eq!(int_range(Some(5), Some(4)), None);
    }

    #[test]
    fn number_ranges_hold_between_whole_bounds() {
        let b = |value, exclusive| Bound { value, exclusive };
        for (lo, hi) in [
            (Some(b(0, false)), Some(b(1, false))),
            (Some(b(0, true)), None),
            (Some(b(-2, true)), Some(b(3, true))),
            (None, Some(b(-1, false))),
            (Some(b(-10, false)), Some(b(-10, false))),
        ] {
            let expr = number_range(lo, hi).expect("nonempty");
            let mut accepts = checker(&expr);
            for s in [
                "0", "0.0", "0.5", "1", "1.0", "1.25", "-1", "-1.5", "-0.5", "2.999", "3", "3.0",
                "-2", "-2.0", "-1.99", "12", "-10", "-10.00", "-10.01", "-9.99", "-0", "00.1",
                "1.",
            ] {
                let x: Option<f64> = s
                    .parse()
                    .ok()
                    .filter(|_| !s.ends_with('.') && !s.starts_with("00") && s != "-0");
                let want = x.is_some_and(|x| {
                    lo.is_none_or(|l| {
                        if l.exclusive {
                            x > l.value as f64
                        } else {
                            x >= l.value as f64
                        }
                    }) && hi.is_none_or(|h| {
                        if h.exclusive {
                            x < h.value as f64
                        } else {
                            x <= h.value as f64
                        }
                    })
                });
                assert_eq!(accepts(s), want, "{s} in {lo:?}..{hi:?}: {expr}");
            }
        }
        assert_eq!(number_range(Some(b(1, true)), Some(b(1, false))), None);
    }
}
