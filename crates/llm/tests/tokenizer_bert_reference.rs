//! The WordPiece tokenizer on a BERT vocabulary as llama.cpp's converter writes it
//! (`tests/data/bert`, made by `make_bert_reference.py`): the ids of transformers'
//! `BertTokenizer` for each reference sentence, `[CLS]` and `[SEP]` included.

use std::path::Path;

use tempra_llm::ModelFile;
use tempra_llm::tokenizer::{TokenizeOptions, TokenizerModel, Vocabulary};

#[test]
fn bert_sentences_tokenize_as_transformers_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bert");
    let file = ModelFile::open(dir.join("bert.gguf")).expect("bert.gguf");
    let vocab = Vocabulary::from_gguf(file.metadata()).expect("vocabulary");
    assert_eq!(vocab.model(), TokenizerModel::Wpm);
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bert.json")).expect("bert.json"))
            .expect("json");
    let cases = golden["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 3);
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> = case["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .map(|t| t.as_u64().expect("id") as u32)
            .collect();
        let got = vocab.tokenize(
            text,
            TokenizeOptions {
                add_special: true,
                parse_special: false,
            },
        );
        assert_eq!(got, want, "{text:?}");
    }
}
