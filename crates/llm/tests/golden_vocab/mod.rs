//! The small vocabularies of `tests/data/tokenizer` (trained by
//! `make_tokenizer_goldens.py` with the Python `sentencepiece` and `tokenizers`
//! packages), built as `Vocabulary`s: one copy for every test that uses them.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use serde_json::Value;
use tempra_llm::tokenizer::{
    PreTokenizer, SpecialTokens, TokenType, TokenizerModel, VocabParts, Vocabulary,
};

/// `tests/data/tokenizer`.
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tokenizer")
}

/// A golden file of `tests/data/tokenizer`.
pub fn load_json(name: &str) -> Value {
    let path = data_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A token id, or `None` for `null`.
pub fn opt_id(v: &Value) -> Option<u32> {
    v.as_u64().map(|x| x as u32)
}

/// A list of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The parts of the vocabulary a golden file describes.
pub fn parts_from_json(g: &Value) -> VocabParts {
    let model = TokenizerModel::from_gguf_name(g["model"].as_str().unwrap()).unwrap();
    let tokens = g["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().as_bytes().to_vec())
        .collect();
    let mut parts = VocabParts::new(model, tokens);
    parts.pre = PreTokenizer::from_gguf_name(g["pre"].as_str().unwrap()).unwrap();
    parts.scores = g["scores"]
        .as_array()
        .map(|a| a.iter().map(|s| s.as_f64().unwrap() as f32).collect());
    parts.token_types = Some(
        g["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| TokenType::from_i32(t.as_i64().unwrap() as i32).unwrap())
            .collect(),
    );
    parts.merges = g["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().as_bytes().to_vec())
        .collect();
    parts.special = SpecialTokens {
        bos: opt_id(&g["bos"]),
        eos: opt_id(&g["eos"]),
        unk: opt_id(&g["unk"]),
        ..Default::default()
    };
    parts.add_bos = g["add_bos"].as_bool().unwrap();
    parts.add_eos = g["add_eos"].as_bool().unwrap();
    parts.add_space_prefix = g["add_space_prefix"].as_bool().unwrap();
    parts.ignore_merges = g["ignore_merges"].as_bool().unwrap();
    parts
}

/// Builds the vocabulary a golden file describes.
pub fn vocab_from_json(g: &Value) -> Vocabulary {
    Vocabulary::from_parts(parts_from_json(g)).unwrap()
}

/// The vocabulary a golden file describes with `controls` appended as control tokens
/// (the special tokens of a chat format the file's tokenizer was not trained with).
pub fn vocab_with_controls(g: &Value, controls: &[&str]) -> Vocabulary {
    let mut parts = parts_from_json(g);
    for text in controls {
        parts.tokens.push(text.as_bytes().to_vec());
        if let Some(scores) = &mut parts.scores {
            scores.push(0.0);
        }
        if let Some(types) = &mut parts.token_types {
            types.push(TokenType::Control);
        }
    }
    Vocabulary::from_parts(parts).unwrap()
}
