//! GPT-2's byte-to-unicode mapping: byte-level BPE vocabularies spell every byte as a
//! printable character (`' '` as `Ġ`, `'\n'` as `Ċ`, ...).
//!
//! Printable Latin-1 bytes (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) map to themselves; the other
//! 68 bytes map, in order, to U+0100, U+0101, ...

/// The character each byte is spelled as.
pub(crate) const BYTE_TO_CHAR: [char; 256] = byte_to_char_table();

/// The highest code point in [`BYTE_TO_CHAR`] plus one.
const CHAR_LIMIT: usize = 0x144;

/// `CHAR_TO_BYTE[c]` is the byte spelled `c`, or `u16::MAX`.
const CHAR_TO_BYTE: [u16; CHAR_LIMIT] = char_to_byte_table();

const fn is_self_mapped(b: u32) -> bool {
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
}

const fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 0x100u32;
    let mut b = 0u32;
    while b < 256 {
        let cp = if is_self_mapped(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        table[b as usize] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
}

const fn char_to_byte_table() -> [u16; CHAR_LIMIT] {
    let mut table = [u16::MAX; CHAR_LIMIT];
    let chars = byte_to_char_table();
    let mut b = 0;
    while b < 256 {
        table[chars[b] as usize] = b as u16;
        b += 1;
    }
    table
}

/// The byte a byte-level character stands for, or `None` for a character outside the
/// mapping.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    match CHAR_TO_BYTE.get(c as usize) {
        Some(&b) if b != u16::MAX => Some(b as u8),
        _ => None,
    }
}

/// Appends the byte-level spelling of `bytes` to `out`.
pub(crate) fn encode_into(bytes: &[u8], out: &mut String) {
    out.extend(bytes.iter().map(|&b| BYTE_TO_CHAR[b as usize]));
}

/// Appends the bytes a byte-level token text stands for to `out`. A text with a
/// character outside the mapping is appended as it is (as Hugging Face's `ByteLevel`
/// decoder does).
pub(crate) fn decode_into(text: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    if let Ok(s) = std::str::from_utf8(text) {
        for c in s.chars() {
            match char_to_byte(c) {
                Some(b) => out.push(b),
                None => {
                    out.truncate(start);
                    out.extend_from_slice(text);
                    return;
                }
            }
        }
    } else {
        out.extend_from_slice(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_is_gpt2s() {
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], 'Ġ');
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], 'Ċ');
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], 'a');
        assert_eq!(BYTE_TO_CHAR[0], '\u{100}');
        assert_eq!(BYTE_TO_CHAR[0xad], '\u{143}');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(BYTE_TO_CHAR[b as usize]), Some(b));
        }
        let mut s = String::new();
        encode_into("é x".as_bytes(), &mut s);
        assert_eq!(s, "Ã©Ġx");
        let mut v = Vec::new();
        decode_into(s.as_bytes(), &mut v);
        assert_eq!(v, "é x".as_bytes());
    }
}
