//! Differential test: every pre-tokenizer against the same regexes run by `fancy-regex`
//! (a backtracking engine, like Oniguruma in Hugging Face `tokenizers`) on random text
//! drawn from an alphabet that mixes every character class the patterns distinguish.

use fancy_regex::Regex;
use proptest::prelude::*;
use tempra_llm::tokenizer::PreTokenizer;

const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
const GPT2_NO_TRAILING: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const TEKKEN: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const DEEPSEEK_LETTERS: &str = "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ\
Ὗ-\u{1f7d}ᾀ-ᾴᾶ-ᾼ\u{1fbe}ῂ-ῄῆ-ῌῐ-\u{1fd3}ῖ-\u{1fdb}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u{2126}ℨ\u{212a}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳ\
Ꙁ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

fn sequences() -> Vec<(PreTokenizer, Vec<Regex>)> {
    let re = |patterns: &[&str]| {
        patterns
            .iter()
            .map(|p| Regex::new(p).unwrap())
            .collect::<Vec<_>>()
    };
    vec![
        (PreTokenizer::Gpt2, re(&[GPT2])),
        (PreTokenizer::Llama3, re(&[LLAMA3])),
        (PreTokenizer::Qwen2, re(&[QWEN2])),
        (PreTokenizer::Qwen35, re(&[QWEN35])),
        (PreTokenizer::Tekken, re(&[TEKKEN])),
        (
            PreTokenizer::DeepseekLlm,
            re(&[
                r"[\r\n]",
                DEEPSEEK_LETTERS,
                r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
                r"\s+$",
                r"[一-龥ࠀ-一가-퟿]+",
                r"\p{N}+",
            ]),
        ),
        (
            PreTokenizer::DeepseekCoder,
            re(&[
                r"[\r\n]",
                r"\s?\p{L}+",
                r"\s?\p{P}+",
                r"[一-龥ࠀ-一가-퟿]+",
                r"\p{N}",
            ]),
        ),
        (
            PreTokenizer::Default,
            re(&[
                r"[\p{P}\$\+<=>\^~\|]+",
                GPT2_NO_TRAILING,
                r"\p{N}+",
                r"[0-9][0-9][0-9]",
            ]),
        ),
        (
            PreTokenizer::Falcon,
            re(&[
                r"[\p{P}\$\+<=>\^~\|`]+",
                GPT2_NO_TRAILING,
                r"[0-9][0-9][0-9]",
            ]),
        ),
        (PreTokenizer::Starcoder, re(&[r"\p{N}", GPT2_NO_TRAILING])),
        (PreTokenizer::Bloom, re(&[r" ?[^(\s|.,!?…。，、।۔،)]+"])),
        (PreTokenizer::Gemma4, re(&[r"[^\n]+|[\n]+"])),
    ]
}

/// Hugging Face's `Split(Isolated)` over a sequence of regexes, with `fancy-regex`.
fn reference_words<'t>(patterns: &[Regex], text: &'t str) -> Vec<&'t str> {
    let mut pieces = if text.is_empty() { vec![] } else { vec![text] };
    for re in patterns {
        let mut next = Vec::new();
        for piece in pieces {
            let mut pos = 0;
            for m in re.find_iter(piece) {
                let m = m.unwrap();
                if m.start() == m.end() {
                    continue;
                }
                if m.start() > pos {
                    next.push(&piece[pos..m.start()]);
                }
                next.push(m.as_str());
                pos = m.end();
            }
            if pos < piece.len() {
                next.push(&piece[pos..]);
            }
        }
        pieces = next;
    }
    pieces
}

const ALPHABET: &[&str] = &[
    "a", "b", "X", "Z", "s", "S", "t", "T", "r", "R", "e", "E", "v", "V", "m", "M", "l", "L", "d",
    "D", "'", "0", "1", "2", "3", " ", " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", ".", ",",
    "!", "?", "-", "/", "\"", "(", ")", "$", "+", "<", "=", "|", "`", "~", "^", "_", "é", "É", "ß",
    "ſ", "中", "文", "한", "ü", "Ω", "\u{2126}", "\u{212a}", "\u{0301}", "\u{093f}", "٣", "Ⅻ", "½",
    "\u{a0}", "\u{3000}", "\u{2028}", "\u{85}", "\u{200b}", "😀", "🙂", "ǅ", "ʰ", "…", "。", "，",
    "µ", "ー", "Ａ", "ｚ", "！", "‘", "İ", "\u{1f7d}", "ῼ", "ā", "Ǆ",
];

fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ALPHABET), 0..28).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn pre_tokenizers_agree_with_fancy_regex(text in text_strategy()) {
        for (pre, patterns) in sequences() {
            let expected = reference_words(&patterns, &text);
            prop_assert_eq!(pre.words(&text), expected, "{:?} on {:?}", pre, text);
        }
    }
}

#[test]
fn long_whitespace_runs_split_like_the_reference() {
    let text = format!(
        "a{}b{}\n{}c  ",
        " ".repeat(300),
        "\t".repeat(50),
        " \n".repeat(40)
    );
    for (pre, patterns) in sequences() {
        assert_eq!(
            pre.words(&text),
            reference_words(&patterns, &text),
            "{pre:?}"
        );
    }
}
