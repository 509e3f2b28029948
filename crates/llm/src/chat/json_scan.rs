//! Scanning JSON that may still be arriving: where a value ends, or that it has not
//! ended yet, or that it cannot be JSON. The tool-call parser uses it on a model's output
//! while it streams.

/// How a scan went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// The value ends just before this byte.
    Done(usize),
    /// The text ends inside the value.
    Partial,
    /// Not JSON.
    Invalid,
}

/// The index of the first byte at or after `i` that is not JSON whitespace.
pub(crate) fn skip_ws(text: &str, mut i: usize) -> usize {
    let b = text.as_bytes();
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// A string starting at `i` (at its `"`), and its decoded text when complete.
pub(crate) fn string(text: &str, i: usize) -> (Scan, Option<String>) {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'"') {
        return (
            if i >= b.len() {
                Scan::Partial
            } else {
                Scan::Invalid
            },
            None,
        );
    }
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'"' => {
                let decoded = serde_json::from_str::<String>(&text[i..=j]).ok();
                return match decoded {
                    Some(s) => (Scan::Done(j + 1), Some(s)),
                    None => (Scan::Invalid, None),
                };
            }
            b'\\' => j += 2,
            c if c < 0x20 => return (Scan::Invalid, None),
            _ => j += 1,
        }
    }
    (Scan::Partial, None)
}

/// A value starting at `i` (after whitespace).
pub(crate) fn value(text: &str, i: usize) -> Scan {
    let b = text.as_bytes();
    let Some(&first) = b.get(i) else {
        return Scan::Partial;
    };
    match first {
        b'"' => string(text, i).0,
        b'{' | b'[' => {
            let mut depth: Vec<u8> = Vec::new();
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'{' | b'[' => depth.push(b[j]),
                    b'}' | b']' => {
                        let open = if b[j] == b'}' { b'{' } else { b'[' };
                        if depth.pop() != Some(open) {
                            return Scan::Invalid;
                        }
                        if depth.is_empty() {
                            return Scan::Done(j + 1);
                        }
                    }
                    b'"' => match string(text, j).0 {
                        Scan::Done(end) => {
                            j = end;
                            continue;
                        }
                        other => return other,
                    },
                    _ => {}
                }
                j += 1;
            }
            Scan::Partial
        }
        b't' | b'f' | b'n' => {
            for word in ["true", "false", "null"] {
                let rest = &text[i..];
                if rest.starts_with(word) {
                    return Scan::Done(i + word.len());
                }
                if word.starts_with(rest) {
                    return Scan::Partial;
                }
            }
            Scan::Invalid
        }
        b'-' | b'0'..=b'9' => {
            let mut j = i + 1;
            while j < b.len() && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                j += 1;
            }
            // A number can only end where something else starts.
            if j == b.len() {
                Scan::Partial
            } else {
                Scan::Done(j)
            }
        }
        _ => Scan::Invalid,
    }
}

/// One field of an object being scanned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// The key.
    pub(crate) key: String,
    /// Where the value starts.
    pub(crate) start: usize,
    /// Where it ends, if it has.
    pub(crate) end: Option<usize>,
}

/// The fields of an object starting at `i` (at its `{`) as far as they have arrived,
/// and how the object scan went (`Done` at its `}`).
pub(crate) fn object_fields(text: &str, i: usize) -> (Vec<Field>, Scan) {
    let b = text.as_bytes();
    let mut fields = Vec::new();
    if b.get(i) != Some(&b'{') {
        return (
            fields,
            if i >= b.len() {
                Scan::Partial
            } else {
                Scan::Invalid
            },
        );
    }
    let mut j = skip_ws(text, i + 1);
    if b.get(j) == Some(&b'}') {
        return (fields, Scan::Done(j + 1));
    }
    loop {
        let (scan, key) = string(text, j);
        let Scan::Done(after_key) = scan else {
            return (fields, scan);
        };
        j = skip_ws(text, after_key);
        match b.get(j) {
            None => return (fields, Scan::Partial),
            Some(b':') => {}
            Some(_) => return (fields, Scan::Invalid),
        }
        let start = skip_ws(text, j + 1);
        let key = key.unwrap_or_default();
        match value(text, start) {
            Scan::Done(end) => {
                fields.push(Field {
                    key,
                    start,
                    end: Some(end),
                });
                j = skip_ws(text, end);
            }
            Scan::Partial => {
                if start < b.len() {
                    fields.push(Field {
                        key,
                        start,
                        end: None,
                    });
                }
                return (fields, Scan::Partial);
            }
            Scan::Invalid => return (fields, Scan::Invalid),
        }
        match b.get(j) {
            None => return (fields, Scan::Partial),
            Some(b',') => j = skip_ws(text, j + 1),
            Some(b'}') => return (fields, Scan::Done(j + 1)),
            Some(_) => return (fields, Scan::Invalid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_end_or_wait() {
        assert_eq!(value(r#"{"a": [1, "}"]} tail"#, 0), Scan::Done(15));
        assert_eq!(value(r#"{"a": [1, "}""#, 0), Scan::Partial);
        assert_eq!(value(r#"{"a": ]"#, 0), Scan::Invalid);
        assert_eq!(value("tr", 0), Scan::Partial);
        assert_eq!(value("true,", 0), Scan::Done(4));
        assert_eq!(value("12", 0), Scan::Partial);
        assert_eq!(value("12}", 0), Scan::Done(2));
        assert_eq!(value("x", 0), Scan::Invalid);
        assert_eq!(
            string(r#""a\"b" "#, 0),
            (Scan::Done(6), Some("a\"b".into()))
        );
    }

    #[test]
    fn object_fields_as_they_arrive() {
        let text = r#"{"name": "f", "arguments": {"x": 1"#;
        let (fields, scan) = object_fields(text, 0);
        assert_eq!(scan, Scan::Partial);
        assert_eq!(fields[0].key, "name");
        assert_eq!(&text[fields[0].start..fields[0].end.unwrap()], "\"f\"");
        assert_eq!(fields[1].key, "arguments");
        assert_eq!(fields[1].end, None);
        assert_eq!(&text[fields[1].start..], "{\"x\": 1");
        let whole = format!("{text}}}}}");
        let (fields, scan) = object_fields(&whole, 0);
        assert_eq!(scan, Scan::Done(whole.len()));
        assert_eq!(
            &whole[fields[1].start..fields[1].end.unwrap()],
            "{\"x\": 1}"
        );
        assert_eq!(object_fields("{\"a\" 1}", 0).1, Scan::Invalid);
        assert_eq!(object_fields("{}", 0), (vec![], Scan::Done(2)));
    }
}
