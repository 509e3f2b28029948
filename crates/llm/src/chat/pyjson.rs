//! The `tojson` filter as Hugging Face's chat templates get it: Python's `json.dumps`
//! with `ensure_ascii=False` by default, `indent`, `separators` and `sort_keys`, and no
//! HTML escaping (minijinja's built-in `tojson` escapes `<`, `>`, `&` and `'` and writes
//! compact separators, which is not what transformers renders).

use std::fmt::Write;

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// `value | tojson(indent=None, ensure_ascii=False, separators=None, sort_keys=False)`.
pub(crate) fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent.or(kwargs.get::<Option<Value>>("indent")?) {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.as_str() {
            Some(s) => s.to_owned(),
            None => {
                let n = v.as_i64().ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent must be an integer or a string",
                    )
                })?;
                " ".repeat(n.max(0) as usize)
            }
        }),
    };
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let (item_sep, key_sep) = match separators {
        Some(s) if s.len() == 2 => (s[0].clone(), s[1].clone()),
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be two strings",
            ));
        }
        None if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        None => (", ".to_owned(), ": ".to_owned()),
    };
    let mut out = String::new();
    let style = Style {
        indent,
        ensure_ascii,
        sort_keys,
        item_sep,
        key_sep,
    };
    dump(value, &style, 0, &mut out)?;
    Ok(Value::from(out))
}

struct Style {
    indent: Option<String>,
    ensure_ascii: bool,
    sort_keys: bool,
    item_sep: String,
    key_sep: String,
}

impl Style {
    fn newline(&self, level: usize, out: &mut String) {
        if let Some(unit) = &self.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(unit);
            }
        }
    }
}

fn not_serializable(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("Object of type {what} is not JSON serializable"),
    )
}

fn dump(value: &Value, style: &Style, level: usize, out: &mut String) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Undefined => return Err(not_serializable("Undefined")),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if value.is_integer() {
                let _ = write!(out, "{value}");
            } else {
                let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
                out.push_str(&python_float(f));
            }
        }
        ValueKind::String => string(value.as_str().unwrap_or(""), style.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                style.newline(level + 1, out);
                dump(item, style, level + 1, out)?;
            }
            style.newline(level, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if style.sort_keys {
                keys.sort();
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                }
                style.newline(level + 1, out);
                match key.kind() {
                    ValueKind::String => {
                        string(key.as_str().unwrap_or(""), style.ensure_ascii, out)
                    }
                    // Python writes other keys as strings of their JSON form.
                    ValueKind::Number | ValueKind::Bool | ValueKind::None => {
                        let mut k = String::new();
                        dump(key, style, level + 1, &mut k)?;
                        string(&k, style.ensure_ascii, out);
                    }
                    _ => return Err(not_serializable("key")),
                }
                out.push_str(&style.key_sep);
                dump(&value.get_item(key)?, style, level + 1, out)?;
            }
            style.newline(level, out);
            out.push('}');
        }
        ValueKind::Bytes => return Err(not_serializable("bytes")),
        _ => return Err(not_serializable(&value.kind().to_string())),
    }
    Ok(())
}

/// A string as Python's `json.dumps` writes it.
fn string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && (c as u32) > 0x7E => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `repr(float)`: the shortest digits that round-trip, in fixed notation for exponents
/// from -4 to 15 and scientific notation (`1e+16`, `1.5e-05`) outside.
fn python_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let s = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let e_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{e_sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_python_writes_them() {
        for (f, want) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789012345.0, "123456789012345.0"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "-0.0"),
            (2.5e-300, "2.5e-300"),
        ] {
            assert_eq!(python_float(f), want, "{f:e}");
        }
    }

    #[test]
    fn strings_escape_as_json_dumps() {
        let mut out = String::new();
        string("a\"b\\c\n\u{1}é😀<&>'\u{7f}", false, &mut out);
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\u0001é😀<&>'\u{7f}\"");
        out.clear();
        string("é😀", true, &mut out);
        assert_eq!(out, "\"\\u00e9\\ud83d\\ude00\"");
    }
}
