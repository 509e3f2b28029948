//! `PreTokenizer`: how a byte-level BPE vocabulary splits text into words before the
//! merges run, chosen by `tokenizer.ggml.pre`.
//!
//! Each pre-tokenizer is a sequence of regex splits (Hugging Face's `Sequence` of
//! `Split(pattern, Isolated)`): the first regex splits the text into its matches and the
//! gaps between them, the next regex splits each of those pieces, and so on. The
//! regexes are the ones in the models' `tokenizer.json` files (llama.cpp's own where a
//! pre-tokenizer exists only there), spelled as [`Pattern`]s so that they match exactly
//! what a backtracking regex engine matches, including `\s+(?!\S)` and the
//! case-insensitive contractions.

use super::char_class::*;
use super::pattern::{Node, Pattern, one, opt, plus, range, star};

/// The pre-tokenizer of a byte-level BPE vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PreTokenizer {
    /// llama.cpp's fallback when `tokenizer.ggml.pre` is absent or `default`.
    Default,
    /// GPT-2 (`gpt-2`, `phi-2`, `mpt`, `olmo`, ...).
    Gpt2,
    /// Llama 3 (`llama-bpe`, `llama3`, `dbrx`, `smaug-bpe`, `chatglm-bpe`, ...): digits
    /// in groups of up to three.
    Llama3,
    /// Qwen2 (`qwen2`, `stablelm2`, `deepseek-r1-qwen`, ...): the Llama 3 regex with
    /// single digits.
    Qwen2,
    /// Qwen3.5 (`qwen35`): Qwen2 with combining marks kept in words.
    Qwen35,
    /// DeepSeek LLM (`deepseek-llm`).
    DeepseekLlm,
    /// DeepSeek Coder (`deepseek-coder`).
    DeepseekCoder,
    /// Mistral's Tekken (`tekken`).
    Tekken,
    /// StarCoder and friends (`starcoder`, `refact`, `command-r`, `smollm`, ...): single
    /// digits, then GPT-2.
    Starcoder,
    /// Falcon (`falcon`).
    Falcon,
    /// BLOOM, Poro, GPT-3 Finnish (`bloom`, `poro-chat`, `gpt3-finnish`).
    Bloom,
    /// Gemma 4 (`tokenizer.ggml.model = gemma4`, or `gpt2` with pre `gemma4`): spaces
    /// become `▁`, the text is split only into runs of newlines and of other
    /// characters, and the merges run on raw UTF-8 characters (not GPT-2's byte
    /// spelling) with `<0xXX>` byte tokens as the fallback.
    Gemma4,
}

/// The GGUF names tempra accepts for `tokenizer.ggml.pre` and what each selects.
pub(crate) struct PreTokenizerName {
    /// The name.
    pub(crate) name: &'static str,
    /// The pre-tokenizer.
    pub(crate) pre: PreTokenizer,
    /// Whether a whole word that is a token skips the merges (`ignore_merges`).
    pub(crate) ignore_merges: bool,
    /// Whether the vocabulary adds BOS when `tokenizer.ggml.add_bos_token` is absent.
    pub(crate) add_bos: bool,
}

const fn name(name: &'static str, pre: PreTokenizer) -> PreTokenizerName {
    PreTokenizerName {
        name,
        pre,
        ignore_merges: false,
        add_bos: false,
    }
}

const fn name_ignoring_merges(name: &'static str, pre: PreTokenizer) -> PreTokenizerName {
    PreTokenizerName {
        name,
        pre,
        ignore_merges: true,
        add_bos: true,
    }
}

/// Every accepted name, following llama.cpp's `llama_vocab::impl::load`.
pub(crate) const PRE_TOKENIZER_NAMES: &[PreTokenizerName] = &[
    name("default", PreTokenizer::Default),
    name_ignoring_merges("llama3", PreTokenizer::Llama3),
    name_ignoring_merges("llama-v3", PreTokenizer::Llama3),
    name_ignoring_merges("llama-bpe", PreTokenizer::Llama3),
    name_ignoring_merges("falcon3", PreTokenizer::Llama3),
    name_ignoring_merges("falcon-h1", PreTokenizer::Llama3),
    name_ignoring_merges("pixtral", PreTokenizer::Llama3),
    name_ignoring_merges("midm-2.0", PreTokenizer::Llama3),
    name_ignoring_merges("lfm2", PreTokenizer::Llama3),
    name("dbrx", PreTokenizer::Llama3),
    name("smaug-bpe", PreTokenizer::Llama3),
    name("chatglm-bpe", PreTokenizer::Llama3),
    name("glm4", PreTokenizer::Llama3),
    name("deepseek-llm", PreTokenizer::DeepseekLlm),
    name("deepseek-coder", PreTokenizer::DeepseekCoder),
    name("falcon", PreTokenizer::Falcon),
    name("gpt-2", PreTokenizer::Gpt2),
    name("phi-2", PreTokenizer::Gpt2),
    name("mpt", PreTokenizer::Gpt2),
    name("olmo", PreTokenizer::Gpt2),
    name("jais", PreTokenizer::Gpt2),
    name("trillion", PreTokenizer::Gpt2),
    name("granite-docling", PreTokenizer::Gpt2),
    name("jina-es", PreTokenizer::Gpt2),
    name("jina-de", PreTokenizer::Gpt2),
    name("jina-v2-es", PreTokenizer::Gpt2),
    name("jina-v2-de", PreTokenizer::Gpt2),
    name("gigachat", PreTokenizer::Gpt2),
    name("a.x-4.0", PreTokenizer::Gpt2),
    name("mellum", PreTokenizer::Gpt2),
    name("modern-bert", PreTokenizer::Gpt2),
    name("exaone4", PreTokenizer::Gpt2),
    name("roberta-bpe", PreTokenizer::Gpt2),
    name("starcoder", PreTokenizer::Starcoder),
    name("refact", PreTokenizer::Starcoder),
    name("command-r", PreTokenizer::Starcoder),
    name("smollm", PreTokenizer::Starcoder),
    name("codeshell", PreTokenizer::Starcoder),
    name("exaone", PreTokenizer::Starcoder),
    name("minerva-7b", PreTokenizer::Starcoder),
    name("qwen2", PreTokenizer::Qwen2),
    name("deepseek-r1-qwen", PreTokenizer::Qwen2),
    name("stablelm2", PreTokenizer::Qwen2),
    name("hunyuan", PreTokenizer::Qwen2),
    name("megrez", PreTokenizer::Qwen2),
    name("solar-open", PreTokenizer::Qwen2),
    name("qwen35", PreTokenizer::Qwen35),
    name_ignoring_merges("tekken", PreTokenizer::Tekken),
    name("bloom", PreTokenizer::Bloom),
    name("poro-chat", PreTokenizer::Bloom),
    name("gpt3-finnish", PreTokenizer::Bloom),
    PreTokenizerName {
        name: "gemma4",
        pre: PreTokenizer::Gemma4,
        ignore_merges: false,
        add_bos: true,
    },
];

impl PreTokenizer {
    /// The pre-tokenizer a `tokenizer.ggml.pre` value names, or `None` when tempra does
    /// not know it.
    pub fn from_gguf_name(name: &str) -> Option<PreTokenizer> {
        lookup_name(name).map(|n| n.pre)
    }

    /// The canonical `tokenizer.ggml.pre` name for this pre-tokenizer.
    pub fn gguf_name(self) -> &'static str {
        match self {
            PreTokenizer::Default => "default",
            PreTokenizer::Gpt2 => "gpt-2",
            PreTokenizer::Llama3 => "llama-bpe",
            PreTokenizer::Qwen2 => "qwen2",
            PreTokenizer::Qwen35 => "qwen35",
            PreTokenizer::DeepseekLlm => "deepseek-llm",
            PreTokenizer::DeepseekCoder => "deepseek-coder",
            PreTokenizer::Tekken => "tekken",
            PreTokenizer::Starcoder => "starcoder",
            PreTokenizer::Falcon => "falcon",
            PreTokenizer::Bloom => "bloom",
            PreTokenizer::Gemma4 => "gemma4",
        }
    }

    /// The regex splits, applied in order.
    fn patterns(self) -> &'static [Pattern] {
        match self {
            PreTokenizer::Default => DEFAULT,
            PreTokenizer::Gpt2 => &[GPT2],
            PreTokenizer::Llama3 => &[LLAMA3],
            PreTokenizer::Qwen2 => &[QWEN2],
            PreTokenizer::Qwen35 => &[QWEN35],
            PreTokenizer::DeepseekLlm => DEEPSEEK_LLM,
            PreTokenizer::DeepseekCoder => DEEPSEEK_CODER,
            PreTokenizer::Tekken => &[TEKKEN],
            PreTokenizer::Starcoder => STARCODER,
            PreTokenizer::Falcon => FALCON,
            PreTokenizer::Bloom => &[BLOOM],
            PreTokenizer::Gemma4 => &[GEMMA4],
        }
    }

    /// Whether words are merged in GPT-2's byte-level spelling (every pre-tokenizer but
    /// Gemma 4's, which merges raw UTF-8 characters).
    pub(crate) fn byte_encoded(self) -> bool {
        self != PreTokenizer::Gemma4
    }

    /// Whether spaces become `▁` before splitting and `▁` a space when decoding
    /// (Gemma 4's SentencePiece-style spelling).
    pub(crate) fn escapes_whitespace(self) -> bool {
        self == PreTokenizer::Gemma4
    }

    /// Splits `text` into words, calling `emit` with each word's byte range in order.
    /// The words cover the text exactly.
    pub fn split(self, text: &str, emit: &mut dyn FnMut(usize, usize)) {
        if !text.is_empty() {
            split_with(self.patterns(), text, 0, text.len(), emit);
        }
    }

    /// The words of `text` (a convenience over [`PreTokenizer::split`]).
    pub fn words(self, text: &str) -> Vec<&str> {
        let mut words = Vec::new();
        self.split(text, &mut |a, b| words.push(&text[a..b]));
        words
    }
}

/// The entry for a `tokenizer.ggml.pre` name.
pub(crate) fn lookup_name(name: &str) -> Option<&'static PreTokenizerName> {
    PRE_TOKENIZER_NAMES.iter().find(|n| n.name == name)
}

fn split_with(
    patterns: &[Pattern],
    text: &str,
    start: usize,
    end: usize,
    emit: &mut dyn FnMut(usize, usize),
) {
    match patterns.split_first() {
        None => emit(start, end),
        Some((first, rest)) => first.split(text, start, end, &mut |a, b| {
            split_with(rest, text, a, b, emit)
        }),
    }
}

const CONTRACTION: Node = Node::Contraction { ignore_case: false };
const CONTRACTION_I: Node = Node::Contraction { ignore_case: true };
const NOT_FOLLOWED_BY_NON_SPACE: Node = Node::NotFollowedBy(is_not_whitespace);

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
const GPT2: Pattern = Pattern(&[
    &[CONTRACTION],
    &[opt(is_space), plus(is_letter)],
    &[opt(is_space), plus(is_number)],
    &[opt(is_space), plus(is_not_space_letter_number)],
    &[plus(is_whitespace), NOT_FOLLOWED_BY_NON_SPACE],
    &[plus(is_whitespace)],
]);

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
/// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
const LLAMA3: Pattern = Pattern(&[
    &[CONTRACTION_I],
    &[opt(is_not_cr_lf_letter_number), plus(is_letter)],
    &[range(is_number, 1, 3)],
    &[
        opt(is_space),
        plus(is_not_space_letter_number),
        star(is_cr_or_lf),
    ],
    &[star(is_whitespace), plus(is_cr_or_lf)],
    &[plus(is_whitespace), NOT_FOLLOWED_BY_NON_SPACE],
    &[plus(is_whitespace)],
]);

/// The Llama 3 regex with `\p{N}` for `\p{N}{1,3}`.
const QWEN2: Pattern = Pattern(&[
    &[CONTRACTION_I],
    &[opt(is_not_cr_lf_letter_number), plus(is_letter)],
    &[one(is_number)],
    &[
        opt(is_space),
        plus(is_not_space_letter_number),
        star(is_cr_or_lf),
    ],
    &[star(is_whitespace), plus(is_cr_or_lf)],
    &[plus(is_whitespace), NOT_FOLLOWED_BY_NON_SPACE],
    &[plus(is_whitespace)],
]);

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|
/// ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
const QWEN35: Pattern = Pattern(&[
    &[CONTRACTION_I],
    &[opt(is_not_cr_lf_letter_number), plus(is_letter_or_mark)],
    &[one(is_number)],
    &[
        opt(is_space),
        plus(is_not_space_letter_mark_number),
        star(is_cr_or_lf),
    ],
    &[star(is_whitespace), plus(is_cr_or_lf)],
    &[plus(is_whitespace), NOT_FOLLOWED_BY_NON_SPACE],
    &[plus(is_whitespace)],
]);

/// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
/// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|
/// ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
const TEKKEN: Pattern = Pattern(&[
    &[
        opt(is_not_cr_lf_letter_number),
        star(is_upper_run),
        plus(is_lower_run),
    ],
    &[
        opt(is_not_cr_lf_letter_number),
        plus(is_upper_run),
        star(is_lower_run),
    ],
    &[one(is_number)],
    &[
        opt(is_space),
        plus(is_not_space_letter_number),
        star(is_cr_lf_or_slash),
    ],
    &[star(is_whitespace), plus(is_cr_or_lf)],
    &[plus(is_whitespace), NOT_FOLLOWED_BY_NON_SPACE],
    &[plus(is_whitespace)],
]);

/// GPT-2's regex without its final `\s+` (as llama.cpp writes it for the sequences
/// below; a lone whitespace character then stays a gap, which splits the same way).
const GPT2_NO_TRAILING_SPACE: Pattern = Pattern(&[
    &[CONTRACTION],
    &[opt(is_space), plus(is_letter)],
    &[opt(is_space), plus(is_number)],
    &[opt(is_space), plus(is_not_space_letter_number)],
    &[plus(is_whitespace), NOT_FOLLOWED_BY_NON_SPACE],
]);

/// `[\p{P}\$\+<=>\^~\|]+`, GPT-2, `\p{N}+`, `[0-9][0-9][0-9]`.
const DEFAULT: &[Pattern] = &[
    Pattern(&[&[plus(is_default_punctuation)]]),
    GPT2_NO_TRAILING_SPACE,
    Pattern(&[&[plus(is_number)]]),
    Pattern(&[&[range(is_ascii_digit, 3, 3)]]),
];

/// `[\p{P}\$\+<=>\^~\|`]+`, GPT-2, `[0-9][0-9][0-9]`.
const FALCON: &[Pattern] = &[
    Pattern(&[&[plus(is_falcon_punctuation)]]),
    GPT2_NO_TRAILING_SPACE,
    Pattern(&[&[range(is_ascii_digit, 3, 3)]]),
];

/// `\p{N}`, GPT-2.
const STARCODER: &[Pattern] = &[Pattern(&[&[one(is_number)]]), GPT2_NO_TRAILING_SPACE];

/// `[\r\n]`, `\s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+`, `\s?[!-/:-~！-／：-～‘-‟　-。]+`, `\s+$`,
/// `[一-龥ࠀ-一가-퟿]+`, `\p{N}+`.
const DEEPSEEK_LLM: &[Pattern] = &[
    Pattern(&[&[one(is_cr_or_lf)]]),
    Pattern(&[&[opt(is_whitespace), plus(is_deepseek_letter)]]),
    Pattern(&[&[opt(is_whitespace), plus(is_deepseek_punctuation)]]),
    Pattern(&[&[plus(is_whitespace), Node::End]]),
    Pattern(&[&[plus(is_deepseek_cjk)]]),
    Pattern(&[&[plus(is_number)]]),
];

/// `[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`.
const DEEPSEEK_CODER: &[Pattern] = &[
    Pattern(&[&[one(is_cr_or_lf)]]),
    Pattern(&[&[opt(is_whitespace), plus(is_letter)]]),
    Pattern(&[&[opt(is_whitespace), plus(is_punctuation)]]),
    Pattern(&[&[plus(is_deepseek_cjk)]]),
    Pattern(&[&[one(is_number)]]),
];

/// `[^\n]+|[\n]+` (Gemma 4: the merges never cross a newline boundary).
const GEMMA4: Pattern = Pattern(&[&[plus(is_not_lf)], &[plus(is_lf)]]);

/// ` ?[^(\s|.,!?…。，、।۔،)]+`
const BLOOM: Pattern = Pattern(&[&[opt(is_space), plus(is_bloom_word)]]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves() {
        for n in PRE_TOKENIZER_NAMES {
            assert_eq!(PreTokenizer::from_gguf_name(n.name), Some(n.pre));
        }
        for pre in PRE_TOKENIZER_NAMES.iter().map(|n| n.pre) {
            assert_eq!(PreTokenizer::from_gguf_name(pre.gguf_name()), Some(pre));
        }
        assert_eq!(PreTokenizer::from_gguf_name("nonsense"), None);
    }

    #[test]
    fn llama3_words() {
        let w = PreTokenizer::Llama3.words("Hello world's 12345 THEY'RE\n\n  x  ");
        assert_eq!(
            w,
            [
                "Hello", " world", "'s", " ", "123", "45", " THEY", "'RE", "\n\n", " ", " x", "  "
            ]
        );
        assert_eq!(
            PreTokenizer::Qwen2.words("x 123"),
            ["x", " ", "1", "2", "3"]
        );
    }

    #[test]
    fn deepseek_llm_words() {
        let w = PreTokenizer::DeepseekLlm.words("Hello 世界 123!\n  ");
        assert_eq!(w, ["Hello", " ", "世界", " ", "123", "!", "\n", "  "]);
    }
}
