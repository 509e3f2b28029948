//! Golden tests of the tokenizers against the Python `sentencepiece` and `tokenizers`
//! packages, on small vocabularies trained by
//! `tests/data/tokenizer/make_tokenizer_goldens.py` (the JSON files are committed; no
//! Python is needed here), and against llama2.c's own tokenization of stories260K.

mod golden_vocab;

use golden_vocab::{ids, load_json, vocab_from_json};
use serde_json::Value;
use tempra_llm::llama2c::Llama2cVocab;
use tempra_llm::testing::shared_file;
use tempra_llm::tokenizer::{
    DetokenizeOptions, PreTokenizer, TokenStreamDecoder, TokenizeOptions, TokenizerModel,
    Vocabulary,
};

fn stream_decode(vocab: &Vocabulary, ids: &[u32]) -> String {
    let mut stream = TokenStreamDecoder::new(DetokenizeOptions::default());
    let mut out = String::new();
    for &id in ids {
        out.push_str(stream.push(vocab, id).unwrap());
    }
    out.push_str(stream.finish());
    out
}

/// Every case: the reference ids, the reference decoding, the lossless round trip and
/// the streaming decoder agreeing with the whole-sequence one.
fn check_golden(file: &str) {
    let g = load_json(file);
    let vocab = vocab_from_json(&g);
    let mut failures = Vec::new();
    for case in g["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected = ids(&case["ids"]);
        let got = vocab.tokenize(text, TokenizeOptions::PLAIN);
        if got != expected {
            failures.push(format!(
                "{text:?}:\n   expected {expected:?}\n   got      {got:?}"
            ));
            continue;
        }
        let decoded = vocab
            .detokenize(&got, DetokenizeOptions::default())
            .unwrap();
        assert_eq!(
            decoded,
            case["decoded"].as_str().unwrap(),
            "{file}: decoding of {text:?}"
        );
        assert_eq!(decoded, text, "{file}: round trip of {text:?}");
        assert_eq!(
            stream_decode(&vocab, &got),
            decoded,
            "{file}: streaming decode of {text:?}"
        );
    }
    for case in g["special_cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let expected = ids(&case["ids"]);
        let got = vocab.tokenize(
            text,
            TokenizeOptions {
                add_special: false,
                parse_special: true,
            },
        );
        if got != expected {
            failures.push(format!(
                "(parse_special) {text:?}:\n   expected {expected:?}\n   got      {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{file}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sentencepiece_bpe_matches_sentencepiece() {
    check_golden("spm_bpe.json");
}

#[test]
fn gpt2_bpe_matches_tokenizers() {
    check_golden("bpe_gpt2.json");
}

#[test]
fn llama3_bpe_matches_tokenizers() {
    check_golden("bpe_llama3.json");
}

#[test]
fn spm_adds_bos_and_space_prefix() {
    let vocab = vocab_from_json(&load_json("spm_bpe.json"));
    let bos = vocab.bos().unwrap();
    let plain = vocab.tokenize("Hello world", TokenizeOptions::PLAIN);
    let with_bos = vocab.tokenize("Hello world", TokenizeOptions::default());
    assert_eq!(with_bos[0], bos);
    assert_eq!(&with_bos[1..], plain);
    assert_eq!(vocab.tokenize("", TokenizeOptions::default()), [bos]);
    assert_eq!(
        vocab
            .detokenize(&with_bos, DetokenizeOptions::default())
            .unwrap(),
        "Hello world"
    );
    let rendered = vocab.detokenize(
        &with_bos,
        DetokenizeOptions {
            render_special: true,
            strip_leading_space: true,
        },
    );
    assert_eq!(rendered.unwrap(), "<s> Hello world");
    // Control-token text is plain text unless parsed.
    let parsed = vocab.tokenize(
        "<s>x",
        TokenizeOptions {
            add_special: false,
            parse_special: true,
        },
    );
    assert_eq!(parsed[0], bos);
    assert!(
        !vocab
            .tokenize("<s>x", TokenizeOptions::PLAIN)
            .contains(&bos)
    );
}

#[test]
fn pre_tokenizers_match_reference_regex_engines() {
    let g = load_json("pretokenizers.json");
    let texts: Vec<&str> = g["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let mut failures = Vec::new();
    for (name, splits) in g["splits"].as_object().unwrap() {
        let pre = PreTokenizer::from_gguf_name(name)
            .unwrap_or_else(|| panic!("unknown pre-tokenizer {name}"));
        for (text, expected) in texts.iter().zip(splits.as_array().unwrap()) {
            let expected: Vec<&str> = expected
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap())
                .collect();
            let got = pre.words(text);
            if got != expected {
                failures.push(format!(
                    "{name} {text:?}:\n   expected {expected:?}\n   got      {got:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn stories260k_prompts_match_llama2c() {
    // `../shared` (TEMPRA_SHARED_DIR): skipped with a message when absent, a failure
    // with REQUIRE_MODELS=1.
    let Some(tok) = shared_file("models/stories260K/tok512.bin") else {
        return;
    };
    let Some(greedy) = shared_file("models/stories260K/greedy.json") else {
        return;
    };
    let vocab = Vocabulary::from_llama2c(&Llama2cVocab::open(&tok, 512).unwrap()).unwrap();
    assert_eq!(vocab.model(), TokenizerModel::Spm);
    let greedy: Value = serde_json::from_str(&std::fs::read_to_string(greedy).unwrap()).unwrap();
    let cases = greedy["cases"].as_array().unwrap();
    assert!(cases.len() >= 2);
    for case in cases {
        let prompt = case["prompt"].as_str().unwrap();
        let expected = ids(&case["prompt_ids"]);
        let got = vocab.tokenize(prompt, TokenizeOptions::default());
        assert_eq!(got, expected, "prompt {prompt:?}");
        assert_eq!(
            vocab
                .detokenize(&got, DetokenizeOptions::default())
                .unwrap(),
            prompt
        );
        assert_eq!(stream_decode(&vocab, &got), prompt);
    }
    assert!(vocab.is_eog(2));
}
