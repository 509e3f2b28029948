//! Unicode character classes used by the pre-tokenizer patterns (`\p{L}`, `\p{N}`,
//! `\p{P}`, `\p{M}`, `\s`, ...), with ASCII fast paths.
//!
//! `\s` is the Unicode `White_Space` property (what Oniguruma, Rust's `regex` and
//! llama.cpp's tables use); the categories come from the Unicode general category table.

use unicode_general_category::{GeneralCategory as Gc, get_general_category};

/// `\s`: Unicode `White_Space`.
pub(crate) fn is_whitespace(c: char) -> bool {
    c.is_whitespace()
}

/// `\S`.
pub(crate) fn is_not_whitespace(c: char) -> bool {
    !c.is_whitespace()
}

/// `\p{L}`: any letter (Lu, Ll, Lt, Lm, Lo).
pub(crate) fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    matches!(
        get_general_category(c),
        Gc::UppercaseLetter
            | Gc::LowercaseLetter
            | Gc::TitlecaseLetter
            | Gc::ModifierLetter
            | Gc::OtherLetter
    )
}

/// `\p{N}`: any number (Nd, Nl, No).
pub(crate) fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    matches!(
        get_general_category(c),
        Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber
    )
}

/// `\p{P}`: any punctuation (Pc, Pd, Ps, Pe, Pi, Pf, Po).
pub(crate) fn is_punctuation(c: char) -> bool {
    matches!(
        get_general_category(c),
        Gc::ConnectorPunctuation
            | Gc::DashPunctuation
            | Gc::OpenPunctuation
            | Gc::ClosePunctuation
            | Gc::InitialPunctuation
            | Gc::FinalPunctuation
            | Gc::OtherPunctuation
    )
}

/// `\p{M}`: any mark (Mn, Mc, Me).
pub(crate) fn is_mark(c: char) -> bool {
    !c.is_ascii()
        && matches!(
            get_general_category(c),
            Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark
        )
}

/// `[\p{L}\p{M}]`.
pub(crate) fn is_letter_or_mark(c: char) -> bool {
    is_letter(c) || is_mark(c)
}

/// `[^\s\p{L}\p{M}\p{N}]`.
pub(crate) fn is_not_space_letter_mark_number(c: char) -> bool {
    is_not_space_letter_number(c) && !is_mark(c)
}

/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`: the "upper" run class of the tekken pattern.
pub(crate) fn is_upper_run(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_uppercase();
    }
    matches!(
        get_general_category(c),
        Gc::UppercaseLetter
            | Gc::TitlecaseLetter
            | Gc::ModifierLetter
            | Gc::OtherLetter
            | Gc::NonspacingMark
            | Gc::SpacingMark
            | Gc::EnclosingMark
    )
}

/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`: the "lower" run class of the tekken pattern.
pub(crate) fn is_lower_run(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_lowercase();
    }
    matches!(
        get_general_category(c),
        Gc::LowercaseLetter
            | Gc::ModifierLetter
            | Gc::OtherLetter
            | Gc::NonspacingMark
            | Gc::SpacingMark
            | Gc::EnclosingMark
    )
}

/// `[\r\n]`.
pub(crate) fn is_cr_or_lf(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// `[\n]`.
pub(crate) fn is_lf(c: char) -> bool {
    c == '\n'
}

/// `[^\n]`.
pub(crate) fn is_not_lf(c: char) -> bool {
    c != '\n'
}

/// `[\r\n/]` (tekken's trailing class).
pub(crate) fn is_cr_lf_or_slash(c: char) -> bool {
    c == '\r' || c == '\n' || c == '/'
}

/// The literal space of ` ?`.
pub(crate) fn is_space(c: char) -> bool {
    c == ' '
}

/// `[^\r\n\p{L}\p{N}]`.
pub(crate) fn is_not_cr_lf_letter_number(c: char) -> bool {
    !is_cr_or_lf(c) && !is_letter(c) && !is_number(c)
}

/// `[^\s\p{L}\p{N}]`.
pub(crate) fn is_not_space_letter_number(c: char) -> bool {
    !is_whitespace(c) && !is_letter(c) && !is_number(c)
}

/// `[0-9]`.
pub(crate) fn is_ascii_digit(c: char) -> bool {
    c.is_ascii_digit()
}

/// `[\p{P}\$\+<=>\^~\|]`: llama.cpp's default pre-tokenizer's first split.
pub(crate) fn is_default_punctuation(c: char) -> bool {
    matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|') || is_punctuation(c)
}

/// ``[\p{P}\$\+<=>\^~\|`]``: falcon's first split.
pub(crate) fn is_falcon_punctuation(c: char) -> bool {
    c == '`' || is_default_punctuation(c)
}

/// `[^(\s|.,!?…。，、।۔،)]`: the bloom / poro pre-tokenizer's word class.
pub(crate) fn is_bloom_word(c: char) -> bool {
    !(is_whitespace(c)
        || matches!(
            c,
            '(' | '|' | '.' | ',' | '!' | '?' | '…' | '。' | '，' | '、' | '।' | '۔' | '،' | ')'
        ))
}

/// DeepSeek LLM's explicit cased-letter ranges (`[A-Za-zµÀ-ÖØ-öø-ƺ...]`), copied from
/// its `tokenizer.json` (as escapes: several of its characters, such as U+1F7D and
/// U+212A, change under Unicode normalization).
const DEEPSEEK_LETTERS: &[(char, char)] = &[
    ('\u{41}', '\u{5A}'),
    ('\u{61}', '\u{7A}'),
    ('\u{B5}', '\u{B5}'),
    ('\u{C0}', '\u{D6}'),
    ('\u{D8}', '\u{F6}'),
    ('\u{F8}', '\u{1BA}'),
    ('\u{1BC}', '\u{1BF}'),
    ('\u{1C4}', '\u{293}'),
    ('\u{295}', '\u{2AF}'),
    ('\u{370}', '\u{373}'),
    ('\u{376}', '\u{376}'),
    ('\u{377}', '\u{377}'),
    ('\u{37B}', '\u{37D}'),
    ('\u{37F}', '\u{37F}'),
    ('\u{386}', '\u{386}'),
    ('\u{388}', '\u{38A}'),
    ('\u{38C}', '\u{38C}'),
    ('\u{38E}', '\u{3A1}'),
    ('\u{3A3}', '\u{3F5}'),
    ('\u{3F7}', '\u{481}'),
    ('\u{48A}', '\u{52F}'),
    ('\u{531}', '\u{556}'),
    ('\u{10A0}', '\u{10C5}'),
    ('\u{13A0}', '\u{13F5}'),
    ('\u{13F8}', '\u{13FD}'),
    ('\u{1C90}', '\u{1CBA}'),
    ('\u{1CBD}', '\u{1CBF}'),
    ('\u{1D00}', '\u{1D2B}'),
    ('\u{1D6B}', '\u{1D77}'),
    ('\u{1D79}', '\u{1D9A}'),
    ('\u{1E00}', '\u{1F15}'),
    ('\u{1F18}', '\u{1F1D}'),
    ('\u{1F20}', '\u{1F45}'),
    ('\u{1F48}', '\u{1F4D}'),
    ('\u{1F50}', '\u{1F57}'),
    ('\u{1F59}', '\u{1F59}'),
    ('\u{1F5B}', '\u{1F5B}'),
    ('\u{1F5D}', '\u{1F5D}'),
    ('\u{1F5F}', '\u{1F7D}'),
    ('\u{1F80}', '\u{1FB4}'),
    ('\u{1FB6}', '\u{1FBC}'),
    ('\u{1FBE}', '\u{1FBE}'),
    ('\u{1FC2}', '\u{1FC4}'),
    ('\u{1FC6}', '\u{1FCC}'),
    ('\u{1FD0}', '\u{1FD3}'),
    ('\u{1FD6}', '\u{1FDB}'),
    ('\u{1FE0}', '\u{1FEC}'),
    ('\u{1FF2}', '\u{1FF4}'),
    ('\u{1FF6}', '\u{1FFC}'),
    ('\u{2102}', '\u{2102}'),
    ('\u{2107}', '\u{2107}'),
    ('\u{210A}', '\u{2113}'),
    ('\u{2115}', '\u{2115}'),
    ('\u{2119}', '\u{211D}'),
    ('\u{2124}', '\u{2124}'),
    ('\u{2126}', '\u{2126}'),
    ('\u{2128}', '\u{2128}'),
    ('\u{212A}', '\u{212D}'),
    ('\u{212F}', '\u{2134}'),
    ('\u{2139}', '\u{2139}'),
    ('\u{213C}', '\u{213F}'),
    ('\u{2145}', '\u{2149}'),
    ('\u{214E}', '\u{214E}'),
    ('\u{2183}', '\u{2183}'),
    ('\u{2184}', '\u{2184}'),
    ('\u{2C00}', '\u{2C7B}'),
    ('\u{2C7E}', '\u{2CE4}'),
    ('\u{2CEB}', '\u{2CEE}'),
    ('\u{2CF2}', '\u{2CF2}'),
    ('\u{2CF3}', '\u{2CF3}'),
    ('\u{A640}', '\u{A66D}'),
    ('\u{A680}', '\u{A69B}'),
    ('\u{A722}', '\u{A76F}'),
    ('\u{A771}', '\u{A787}'),
    ('\u{A78B}', '\u{A78E}'),
    ('\u{AB70}', '\u{ABBF}'),
    ('\u{FB00}', '\u{FB06}'),
    ('\u{FB13}', '\u{FB17}'),
    ('\u{FF21}', '\u{FF3A}'),
    ('\u{FF41}', '\u{FF5A}'),
    ('\u{10400}', '\u{1044F}'),
    ('\u{104B0}', '\u{104D3}'),
    ('\u{104D8}', '\u{104FB}'),
    ('\u{10C80}', '\u{10CB2}'),
    ('\u{10CC0}', '\u{10CF2}'),
    ('\u{118A0}', '\u{118DF}'),
    ('\u{1E900}', '\u{1E943}'),
];

/// DeepSeek LLM's punctuation ranges `[!-/:-~！-／：-～‘-‟　-。]`.
const DEEPSEEK_PUNCTUATION: &[(char, char)] = &[
    ('!', '/'),
    (':', '~'),
    ('！', '／'),
    ('：', '～'),
    ('‘', '‟'),
    ('\u{3000}', '。'),
];

/// DeepSeek's CJK ranges `[一-龥ࠀ-一가-퟿]`.
const DEEPSEEK_CJK: &[(char, char)] = &[('一', '龥'), ('ࠀ', '一'), ('가', '\u{D7FF}')];

fn in_ranges(ranges: &[(char, char)], c: char) -> bool {
    ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

/// DeepSeek LLM's letter class.
pub(crate) fn is_deepseek_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    in_ranges(DEEPSEEK_LETTERS, c)
}

/// DeepSeek LLM's punctuation class.
pub(crate) fn is_deepseek_punctuation(c: char) -> bool {
    in_ranges(DEEPSEEK_PUNCTUATION, c)
}

/// DeepSeek's CJK class.
pub(crate) fn is_deepseek_cjk(c: char) -> bool {
    !c.is_ascii() && in_ranges(DEEPSEEK_CJK, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories() {
        assert!(is_letter('é') && is_letter('Ж') && is_letter('中') && !is_letter('1'));
        assert!(is_number('٣') && is_number('Ⅻ') && is_number('½') && !is_number('x'));
        assert!(is_punctuation('!') && is_punctuation('«') && !is_punctuation('$'));
        assert!(is_default_punctuation('$') && is_default_punctuation('|'));
        assert!(is_whitespace('\u{3000}') && is_whitespace('\u{85}') && !is_whitespace('\u{200B}'));
        assert!(is_mark('\u{301}') && !is_mark('a') && is_letter_or_mark('\u{301}'));
        assert!(is_upper_run('A') && is_upper_run('中') && !is_upper_run('a'));
        assert!(is_lower_run('a') && is_lower_run('中') && !is_lower_run('A'));
        assert!(is_deepseek_letter('Ω') && is_deepseek_letter('ä') && !is_deepseek_letter('中'));
        assert!(is_deepseek_cjk('中') && is_deepseek_cjk('한') && !is_deepseek_cjk('a'));
    }
}
