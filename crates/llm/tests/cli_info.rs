//! `tempra info`: snapshot of the summary of a generated model, and a llama2.c checkpoint
//! opened directly.
#![cfg(feature = "cli")]

use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, shared_file, write_random_model};

mod cli_helpers;
use cli_helpers::{stdout_of, tempra};

#[test]
fn info_on_a_tiny_q8_0_model() {
    let dir = tempfile::tempdir().unwrap();
    let spec = RandomModelSpec::llama(ModelShape::TINY)
        .with_qtype(QuantType::Q8_0)
        .with_seed(1);
    std::fs::write(
        dir.path().join("tiny.gguf"),
        write_random_model(&spec, Vec::new()).unwrap(),
    )
    .unwrap();
    insta::assert_snapshot!(stdout_of(tempra(dir.path(), &["info", "-m", "tiny.gguf"])));
}

#[test]
fn info_on_a_tied_f16_model() {
    let dir = tempfile::tempdir().unwrap();
    let shape = ModelShape::parse(
        "dim=128,layers=3,heads=4,kv_heads=1,ffn=384,vocab=300,context=64,tied=true",
    )
    .unwrap();
    let spec = RandomModelSpec::llama(shape).with_qtype(QuantType::F16);
    std::fs::write(
        dir.path().join("tied.gguf"),
        write_random_model(&spec, Vec::new()).unwrap(),
    )
    .unwrap();
    insta::assert_snapshot!(stdout_of(tempra(
        dir.path(),
        &["info", "--model", "tied.gguf"]
    )));
}

#[test]
fn info_on_a_llama2c_checkpoint() {
    let (Some(bin), Some(tok)) = (
        shared_file("models/stories260K/stories260K.bin"),
        shared_file("models/stories260K/tok512.bin"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = stdout_of(tempra(
        dir.path(),
        &[
            "info",
            "-m",
            bin.to_str().unwrap(),
            "--tokenizer",
            tok.to_str().unwrap(),
        ],
    ));
    for line in [
        "format:         llama2.c checkpoint, 1056540 bytes",
        "architecture:   llama",
        "heads:          8 query, 4 key/value (GQA 2), head dim 8 (k) 8 (v)",
        "vocabulary:     512 tokens, llama, bos 1, eos 2, unk 0",
        "tensors:        47: f32 47",
        "output tied to token_embd",
    ] {
        assert!(out.contains(line), "missing `{line}` in\n{out}");
    }
}
