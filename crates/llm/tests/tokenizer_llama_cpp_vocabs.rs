//! llama.cpp's tokenizer test vocabularies (`models/ggml-vocab-*.gguf` with their
//! `.inp` inputs and `.out` expected ids, made with the models' Hugging Face tokenizers):
//! every input tokenized with no special tokens added and special-token text not
//! parsed must give the expected ids, and detokenize back to the input.
//!
//! The files are large and not in the repository. Set `TEMPRA_VOCAB_DIR` to a folder
//! holding them (`.ci/run` unpacks them from the llama-cpp-python source package on
//! PyPI); without it the test skips with a message. With `TEMPRA_VOCAB_DIR` set and
//! `REQUIRE_MODELS=1`, a missing file is a failure.

use std::path::{Path, PathBuf};

use tempra_llm::ModelFile;
use tempra_llm::tokenizer::{DetokenizeOptions, TokenizeOptions, Vocabulary};

/// The vocabularies tempra implements, as named in llama.cpp's `models/`.
const VOCABS: &[&str] = &[
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
];

/// Vocabularies whose decoding is not the identity on every input: none of the test
/// inputs are lossy for the tokenizers above, so this stays empty unless a file changes.
const LOSSY: &[&str] = &[];

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn vocab_dir() -> Option<PathBuf> {
    match std::env::var_os("TEMPRA_VOCAB_DIR") {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            eprintln!(
                "skipping: TEMPRA_VOCAB_DIR is not set (llama.cpp's ggml-vocab-*.gguf files)"
            );
            None
        }
    }
}

/// The cases of one vocabulary: (input, expected ids).
fn cases(base: &Path) -> Vec<(String, Vec<u32>)> {
    let inp = std::fs::read_to_string(base.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(base.with_extension("gguf.out")).unwrap();
    let mut inputs: Vec<&str> = inp.split(SEPARATOR).collect();
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let expected: Vec<Vec<u32>> = out
        .split('\n')
        .take(inputs.len())
        .map(|line| {
            line.split_whitespace()
                .map(|t| t.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        expected.len(),
        inputs.len(),
        "{}: .inp and .out disagree",
        base.display()
    );
    inputs.into_iter().map(String::from).zip(expected).collect()
}

#[test]
fn llama_cpp_vocabularies_match_their_expected_ids() {
    let Some(dir) = vocab_dir() else { return };
    let require = std::env::var("REQUIRE_MODELS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut checked = 0;
    for name in VOCABS {
        let base = dir.join(format!("ggml-vocab-{name}.gguf"));
        if !base.is_file() || !base.with_extension("gguf.inp").is_file() {
            assert!(!require, "{} is missing (REQUIRE_MODELS=1)", base.display());
            eprintln!("skipping {name}: {} is missing", base.display());
            continue;
        }
        let model = ModelFile::open(&base).unwrap();
        let vocab =
            Vocabulary::from_gguf(model.metadata()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (text, expected) in cases(&base) {
            let got = vocab.tokenize(&text, TokenizeOptions::PLAIN);
            if got != expected {
                failures.push(format!(
                    "{name} {text:?}:\n   expected {expected:?}\n   got      {got:?}"
                ));
                continue;
            }
            let back = vocab
                .detokenize(&got, DetokenizeOptions::default())
                .unwrap();
            if back != text && !LOSSY.contains(name) {
                failures.push(format!("{name}: detokenize({text:?}) = {back:?}"));
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{checked} cases match");
}
