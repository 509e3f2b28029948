//! `tempra tokenize` / `tempra detokenize` on vocabulary-only GGUF files written from the
//! golden vocabularies (tests/data/tokenizer), and on llama2.c's tok512.bin.
#![cfg(feature = "cli")]

use std::path::Path;

use serde_json::Value;
use tempra_llm::gguf::{GgufWriter, Metadata};
use tempra_llm::tokenizer::Vocabulary;

mod cli_helpers;
mod golden_vocab;
use cli_helpers::{fails, stdout_of, tempra};
use golden_vocab::{load_json as golden, parts_from_json};

/// Writes the golden file's vocabulary as a vocabulary-only GGUF (without the file's
/// add-EOS flag, as these cases were made).
fn write_vocab_gguf(g: &Value, path: &Path) {
    let mut parts = parts_from_json(g);
    parts.add_eos = false;
    let vocab = Vocabulary::from_parts(parts).unwrap();
    let mut md = Metadata::new();
    vocab.write_gguf_metadata(&mut md);
    let bytes = GgufWriter::new(Vec::new(), &md, Vec::new())
        .unwrap()
        .finish()
        .unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Every golden case through `-f FILE --no-special --json` (bytes verbatim), and back
/// through `detokenize`.
#[test]
fn tokenize_files_match_goldens() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["spm_bpe.json", "bpe_llama3.json", "bpe_gpt2.json"] {
        let g = golden(name);
        write_vocab_gguf(&g, &d.join("vocab.gguf"));
        for (i, case) in g["cases"].as_array().unwrap().iter().enumerate() {
            if i % 3 != 0 && name != "spm_bpe.json" {
                continue; // every case for one vocabulary, a third for the others
            }
            let text = case["text"].as_str().unwrap();
            std::fs::write(d.join("input.txt"), text).unwrap();
            let out = stdout_of(tempra(
                d,
                &[
                    "tokenize",
                    "-m",
                    "vocab.gguf",
                    "-f",
                    "input.txt",
                    "--no-special",
                    "--json",
                ],
            ));
            let got: Vec<u64> = serde_json::from_str(&out).unwrap();
            let expected: Vec<u64> = case["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(got, expected, "{name}: {text:?}");
            if !got.is_empty() {
                let ids = got.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
                let back = tempra(d, &["detokenize", "-m", "vocab.gguf", "--ids", &ids]);
                assert!(back.status.success());
                assert_eq!(
                    String::from_utf8(back.stdout).unwrap(),
                    text,
                    "{name}: detokenize"
                );
            }
        }
    }
}

#[test]
fn output_formats() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_vocab_gguf(&golden("spm_bpe.json"), &d.join("spm.gguf"));
    let plain = stdout_of(tempra(
        d,
        &["tokenize", "-m", "spm.gguf", "-p", "Hello world"],
    ));
    let json = stdout_of(tempra(
        d,
        &["tokenize", "-m", "spm.gguf", "-p", "Hello world", "--json"],
    ));
    let pieces = stdout_of(tempra(
        d,
        &[
            "tokenize",
            "-m",
            "spm.gguf",
            "-p",
            "Hello wörld",
            "--show-pieces",
        ],
    ));
    let no_special = stdout_of(tempra(
        d,
        &[
            "tokenize",
            "-m",
            "spm.gguf",
            "-p",
            "Hello world",
            "--no-special",
        ],
    ));
    let text = stdout_of(tempra(
        d,
        &[
            "detokenize",
            "-m",
            "spm.gguf",
            "--ids",
            &plain.trim().replace(' ', ","),
        ],
    ));
    insta::assert_snapshot!(
        "tokenize_output_formats",
        format!(
            "plain:       {plain}json:        {json}pieces:      {pieces}no-special:  {no_special}detokenize:  {text:?}\n"
        )
    );
    let help = stdout_of(tempra(d, &["tokenize", "--help"]));
    insta::assert_snapshot!("tokenize_help", help);
}

#[test]
fn bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_vocab_gguf(&golden("bpe_gpt2.json"), &d.join("bpe.gguf"));
    std::fs::write(d.join("latin1.txt"), b"caf\xe9 au lait").unwrap();
    std::fs::write(d.join("text.txt"), "hello").unwrap();
    fails(
        d,
        &["tokenize", "-m", "bpe.gguf", "-f", "latin1.txt"],
        "latin1.txt: invalid UTF-8 at byte 3",
    );
    // A character cut off at the end of the file, a stray continuation byte after
    // multi-byte text, an overlong encoding: each an error at its offset, no panic.
    for (name, bytes, offset) in [
        ("cut.txt", &b"ok \xf0\x9f\x98"[..], 3),
        ("stray.txt", &b"h\xc3\xa9llo \x80"[..], 7),
        ("overlong.txt", &b"a\xc0\xafb"[..], 1),
    ] {
        std::fs::write(d.join(name), bytes).unwrap();
        fails(
            d,
            &["tokenize", "-m", "bpe.gguf", "-f", name, "--no-special"],
            &format!("{name}: invalid UTF-8 at byte {offset}"),
        );
    }
    fails(
        d,
        &["tokenize", "-m", "bpe.gguf", "-f", "missing.txt"],
        "missing.txt",
    );
    fails(
        d,
        &["tokenize", "-m", "text.txt", "-p", "x"],
        "text.txt: not a GGUF file or a llama2.c tokenizer",
    );
    fails(d, &["tokenize", "-m", "bpe.gguf"], "--prompt");
    fails(
        d,
        &["detokenize", "-m", "bpe.gguf", "--ids", "1,x"],
        "`x` is not a token id",
    );
    fails(
        d,
        &["detokenize", "-m", "bpe.gguf", "--ids", "999999"],
        "token id 999999 is out of range",
    );

    // Inconsistent tokenizer metadata.
    let g = golden("bpe_gpt2.json");
    write_vocab_gguf(&g, &d.join("ok.gguf"));
    let file = tempfile_model(d, "ok.gguf", |md| md.set("tokenizer.ggml.pre", "mystery"));
    fails(
        d,
        &["tokenize", "-m", &file, "-p", "x"],
        "unknown tokenizer `mystery`",
    );
    let file = tempfile_model(d, "ok.gguf", |md| {
        md.set(
            "tokenizer.ggml.token_type",
            tempra_llm::gguf::Array::I32(vec![1; 3]),
        )
    });
    fails(
        d,
        &["tokenize", "-m", &file, "-p", "x"],
        "has 3 entries, but the vocabulary has 900 tokens",
    );
}

/// Rewrites a GGUF's metadata with `edit` applied; returns the new file name.
fn tempfile_model(dir: &Path, from: &str, edit: impl FnOnce(&mut Metadata)) -> String {
    let model = tempra_llm::ModelFile::open(dir.join(from)).unwrap();
    let mut md = model.metadata().clone();
    edit(&mut md);
    let bytes = GgufWriter::new(Vec::new(), &md, Vec::new())
        .unwrap()
        .finish()
        .unwrap();
    let name = format!("edited-{}.gguf", md.len() + bytes.len());
    std::fs::write(dir.join(&name), bytes).unwrap();
    name
}

#[test]
fn llama2c_tokenizer_file() {
    let Some(tok) = tempra_llm::testing::shared_file("models/stories260K/tok512.bin") else {
        return;
    };
    let Some(ckpt) = tempra_llm::testing::shared_file("models/stories260K/stories260K.bin") else {
        return;
    };
    let (tok, ckpt) = (tok.to_str().unwrap(), ckpt.to_str().unwrap());
    let d = Path::new(".");
    assert_eq!(
        stdout_of(tempra(
            d,
            &["tokenize", "-m", tok, "-p", "Once upon a time"]
        )),
        "1 403 407 261 378\n"
    );
    let with_model = tempra(
        d,
        &[
            "tokenize",
            "-m",
            ckpt,
            "--tokenizer",
            tok,
            "-p",
            "Once upon a time",
            "--json",
        ],
    );
    assert_eq!(stdout_of(with_model), "[1,403,407,261,378]\n");
    assert_eq!(
        stdout_of(tempra(
            d,
            &["detokenize", "-m", tok, "--ids", "1,403,407,261,378"]
        )),
        "Once upon a time"
    );
}

/// A WordPiece (`bert`) vocabulary-only GGUF: `[CLS] … [SEP]` framing, normalization,
/// `[UNK]`, detokenization with the space clean-up; one without `[UNK]` is an error.
#[test]
fn word_piece_vocabulary() {
    use tempra_llm::gguf::{Array, TokenType};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |name: &str, unk: bool| {
        let mut md = Metadata::new();
        md.set("tokenizer.ggml.model", "bert");
        let tokens = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁,", "▁world", "s", "▁!",
        ];
        md.set(
            "tokenizer.ggml.tokens",
            Array::String(tokens.iter().map(|t| t.as_bytes().to_vec()).collect()),
        );
        let mut types = vec![TokenType::Normal.as_i32(); tokens.len()];
        types[..4].fill(TokenType::Control.as_i32());
        md.set("tokenizer.ggml.token_type", Array::I32(types));
        if unk {
            md.set("tokenizer.ggml.unknown_token_id", 1u32);
        }
        md.set("tokenizer.ggml.cls_token_id", 2u32);
        md.set("tokenizer.ggml.seperator_token_id", 3u32);
        let bytes = GgufWriter::new(Vec::new(), &md, Vec::new())
            .unwrap()
            .finish()
            .unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    write("bert.gguf", true);
    write("no-unk.gguf", false);
    let tokenize = |args: &[&str]| {
        let mut all = vec!["tokenize", "-m", "bert.gguf"];
        all.extend_from_slice(args);
        stdout_of(tempra(d, &all))
    };
    assert_eq!(tokenize(&["-p", "Hello,  WORLDS!"]), "2 4 5 6 7 8 3\n");
    assert_eq!(tokenize(&["-p", "héllo wörld?", "--no-special"]), "4 6 1\n");
    let back = stdout_of(tempra(
        d,
        &["detokenize", "-m", "bert.gguf", "--ids", "2,4,5,6,7,8,3"],
    ));
    assert_eq!(back, "hello, worlds!");
    fails(
        d,
        &["tokenize", "-m", "no-unk.gguf", "-p", "x"],
        "needs an unknown token ([UNK])",
    );
}
