//! llama.cpp's tokenizer test vocabularies (`models/ggml-vocab-*.gguf` with their
//! `.inp` inputs and `.out` expected ids, made with the models' Hugging Face tokenizers):
//! every input tokenized with no special tokens added and special-token text not
//! parsed must give the expected ids (llama.cpp's `test-tokenizer-0`), and detokenize
//! back to the input.
//!
//! The files are large and not in the repository. Set `TEMPRA_VOCAB_DIR` to a folder
//! holding them: `crates/llm/scripts/fetch_llama_cpp_vocabs.py DIR` unpacks them from the
//! llama-cpp-python source package on PyPI (`.ci/run` does, into
//! `target/llama-cpp-vocab`). Without `TEMPRA_VOCAB_DIR` the tests skip with a message;
//! with `REQUIRE_MODELS=1` a missing folder or file is a failure.
//!
//! WordPiece (`bert-bge`) normalizes (lowercase, accents, whitespace) and so does not
//! round-trip: its detokenizations must be llama.cpp's instead
//! (`tests/data/wpm/bert_bge.json`, made by `crates/llm/scripts/make_wpm_goldens.py`
//! with llama.cpp's `llama_detokenize`), and a few strings must tokenize as Hugging
//! Face's BERT tokenizer does with the same vocabulary, `[CLS]`/`[SEP]` included.
//!
//! Every vocabulary in the folder that has test cases is either checked ([`SUPPORTED`])
//! or listed with the reason it is not ([`UNSUPPORTED`]); a new file that is neither
//! fails the test, so that a version bump of the package cannot hide one. Every failing
//! case is reported (vocabulary, case index, input, expected and produced ids), not just
//! the first.

use std::path::{Path, PathBuf};

use tempra_llm::ModelFile;
use tempra_llm::tokenizer::{DetokenizeOptions, TokenId, TokenizeOptions, Vocabulary};

/// The vocabularies tempra implements, as named in llama.cpp's `models/`.
const SUPPORTED: &[&str] = &[
    "llama-spm",
    "phi-3",
    "llama-bpe",
    "qwen2",
    "qwen35",
    "gpt-2",
    "mpt",
    "falcon",
    "starcoder",
    "refact",
    "command-r",
    "deepseek-llm",
    "deepseek-coder",
    "gemma-4",
    "bert-bge",
];

/// The vocabularies with test cases that tempra does not implement, and why.
const UNSUPPORTED: &[(&str, &str)] = &[];

/// Cases whose detokenization is not the input, per vocabulary, with the reason:
/// `(vocabulary, case index, reason)`. Every other case must round-trip exactly.
const NOT_LOSSLESS: &[(&str, usize, &str)] = &[];

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

/// The WordPiece goldens (see the module docs).
const BERT_BGE_GOLDEN: &str = include_str!("data/wpm/bert_bge.json");

fn bert_bge_golden() -> serde_json::Value {
    serde_json::from_str(BERT_BGE_GOLDEN).unwrap()
}

fn require_models() -> bool {
    std::env::var("REQUIRE_MODELS").is_ok_and(|v| v == "1")
}

/// The folder of vocabularies, or `None` (skip) when `TEMPRA_VOCAB_DIR` is unset.
fn vocab_dir() -> Option<PathBuf> {
    match std::env::var_os("TEMPRA_VOCAB_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            assert!(
                dir.is_dir() || !require_models(),
                "TEMPRA_VOCAB_DIR={} is not a folder (REQUIRE_MODELS=1); \
                 run crates/llm/scripts/fetch_llama_cpp_vocabs.py {0}",
                dir.display()
            );
            Some(dir)
        }
        None => {
            assert!(
                !require_models(),
                "TEMPRA_VOCAB_DIR is not set (REQUIRE_MODELS=1): point it at llama.cpp's \
                 ggml-vocab-*.gguf files (crates/llm/scripts/fetch_llama_cpp_vocabs.py DIR)"
            );
            eprintln!(
                "skipping: TEMPRA_VOCAB_DIR is not set (llama.cpp's ggml-vocab-*.gguf files; \
                 crates/llm/scripts/fetch_llama_cpp_vocabs.py DIR fetches them)"
            );
            None
        }
    }
}

/// One test case: its index in the files, the input and the expected ids.
struct Case {
    index: usize,
    text: String,
    expected: Vec<TokenId>,
}

/// The cases of one vocabulary, read as llama.cpp's `test-tokenizer-0` reads them.
fn cases(base: &Path) -> Vec<Case> {
    let inp = std::fs::read_to_string(base.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(base.with_extension("gguf.out")).unwrap();
    let mut inputs: Vec<&str> = inp.split(SEPARATOR).collect();
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let expected: Vec<Vec<TokenId>> = out
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(|t| t.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        expected.len(),
        inputs.len(),
        "{}: .inp has {} cases, .out {}",
        base.display(),
        inputs.len(),
        expected.len()
    );
    inputs
        .into_iter()
        .zip(expected)
        .enumerate()
        .map(|(index, (text, expected))| Case {
            index,
            text: text.to_string(),
            expected,
        })
        .collect()
}

/// The names (`llama-spm`, ...) of the vocabularies in `dir` that have test cases.
fn vocabularies_with_cases(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            Some(
                name.strip_prefix("ggml-vocab-")?
                    .strip_suffix(".gguf.inp")?
                    .to_string(),
            )
        })
        .collect();
    names.sort();
    names
}

/// Runs `check` on every case of every supported vocabulary in the folder, collecting
/// the failures it reports; panics with all of them.
fn for_each_case(what: &str, check: impl Fn(&str, &Vocabulary, &Case) -> Option<String>) {
    let Some(dir) = vocab_dir() else { return };
    let mut failures = Vec::new();
    for name in vocabularies_with_cases(&dir) {
        if let Some((_, reason)) = UNSUPPORTED.iter().find(|(n, _)| *n == name) {
            eprintln!("not checked: {name}: {reason}");
        } else if !SUPPORTED.contains(&name.as_str()) {
            failures.push(format!(
                "ggml-vocab-{name}.gguf has test cases but is neither in SUPPORTED nor in \
                 UNSUPPORTED"
            ));
        }
    }
    let (mut checked, mut vocabs) = (0, 0);
    for name in SUPPORTED {
        let base = dir.join(format!("ggml-vocab-{name}.gguf"));
        if !base.is_file()
            || !base.with_extension("gguf.inp").is_file()
            || !base.with_extension("gguf.out").is_file()
        {
            let missing = format!("{} (or its .inp/.out) is missing", base.display());
            assert!(!require_models(), "{missing} (REQUIRE_MODELS=1)");
            eprintln!("skipping {name}: {missing}");
            continue;
        }
        let model = ModelFile::open(&base).unwrap_or_else(|e| panic!("{name}: {e}"));
        let vocab =
            Vocabulary::from_gguf(model.metadata()).unwrap_or_else(|e| panic!("{name}: {e}"));
        vocabs += 1;
        for case in cases(&base) {
            checked += 1;
            if let Some(failure) = check(name, &vocab, &case) {
                failures.push(format!(
                    "{name} case {} {:?}:\n{failure}",
                    case.index, case.text
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{what}: {} of {checked} cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{what}: all {checked} cases of {vocabs} vocabularies pass");
}

#[test]
fn llama_cpp_vocabularies_match_their_expected_ids() {
    for_each_case("expected ids", |_, vocab, case| {
        let got = vocab.tokenize(&case.text, TokenizeOptions::PLAIN);
        (got != case.expected)
            .then(|| format!("   expected {:?}\n   got      {got:?}", case.expected))
    });
}

#[test]
fn llama_cpp_vocabularies_round_trip() {
    let golden = bert_bge_golden();
    for_each_case("round trip", |name, vocab, case| {
        if name == "bert-bge" {
            let ids = vocab.tokenize(&case.text, TokenizeOptions::PLAIN);
            let expected = golden["llama_cpp_detokenized"][case.index]
                .as_str()
                .unwrap();
            let llama_cpp_style = DetokenizeOptions {
                strip_leading_space: false,
                ..DetokenizeOptions::default()
            };
            let exact = vocab.detokenize(&ids, llama_cpp_style).unwrap();
            let stripped = vocab
                .detokenize(&ids, DetokenizeOptions::default())
                .unwrap();
            let expected_stripped = expected.strip_prefix(' ').unwrap_or(expected);
            return (exact != expected || stripped != expected_stripped).then(|| {
                format!(
                    "   llama.cpp detokenizes to {expected:?}\n   tempra to {exact:?} \
                     (stripped: {stripped:?})"
                )
            });
        }
        if NOT_LOSSLESS
            .iter()
            .any(|&(n, i, _)| n == name && i == case.index)
        {
            return None;
        }
        let ids = vocab.tokenize(&case.text, TokenizeOptions::PLAIN);
        let back = vocab
            .detokenize(&ids, DetokenizeOptions::default())
            .unwrap();
        (back != case.text).then(|| format!("   detokenized to {back:?}"))
    });
}

/// A few strings, tokenized with `[CLS]`/`[SEP]`, as Hugging Face's BERT tokenizer
/// (`BertWordPieceTokenizer` over the same vocabulary) tokenizes them: accents, case,
/// CJK, contractions, control and zero-width characters, unknown words.
#[test]
fn bert_bge_matches_hugging_face_bert_tokenizer() {
    let Some(dir) = vocab_dir() else { return };
    let path = dir.join("ggml-vocab-bert-bge.gguf");
    if !path.is_file() {
        assert!(
            !require_models(),
            "{} is missing (REQUIRE_MODELS=1)",
            path.display()
        );
        eprintln!("skipping: {} is missing", path.display());
        return;
    }
    let model = ModelFile::open(&path).unwrap();
    let vocab = Vocabulary::from_gguf(model.metadata()).unwrap();
    let golden = bert_bge_golden();
    let mut failures = Vec::new();
    for case in golden["hf"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected: Vec<TokenId> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().unwrap() as TokenId)
            .collect();
        let got = vocab.tokenize(text, TokenizeOptions::default());
        if got != expected {
            failures.push(format!(
                "{text:?}:\n   expected {expected:?}\n   got      {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
