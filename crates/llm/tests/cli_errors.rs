//! Bad input to the `tempra` binary: one `error:` line on stderr, a non-zero exit, never
//! a panic.
#![cfg(feature = "cli")]

use std::process::Command;

use tempra_llm::gguf::{GgufWriter, Metadata, TensorSpec};
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};
use tempra_tensor::{DType, Shape};

mod cli_helpers;
use cli_helpers::fails;

fn tiny() -> Vec<u8> {
    let shape = ModelShape::parse("dim=64,layers=1,heads=2,ffn=128,vocab=300").unwrap();
    write_random_model(&RandomModelSpec::llama(shape), Vec::new()).unwrap()
}

#[test]
fn bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = tiny();
    std::fs::write(d.join("text.gguf"), "just some text\n").unwrap();
    std::fs::write(d.join("cut.gguf"), &good[..good.len() / 3]).unwrap();
    std::fs::write(d.join("good.gguf"), &good).unwrap();

    let mut bad_dtype = good.clone();
    let name = good
        .windows(17)
        .position(|w| w == b"token_embd.weight")
        .unwrap();
    let type_at = name + 17 + 4 + 2 * 8;
    bad_dtype[type_at..type_at + 4].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(d.join("dtype.gguf"), &bad_dtype).unwrap();

    let mut md = Metadata::new();
    md.set("general.architecture", "mamba");
    let spec = TensorSpec::new("token_embd.weight", Shape::new(&[4]).unwrap(), DType::F32);
    let mut w = GgufWriter::new(Vec::new(), &md, vec![spec]).unwrap();
    w.write_data(&[0; 16]).unwrap();
    std::fs::write(d.join("mamba.gguf"), w.finish().unwrap()).unwrap();

    fails(
        d,
        &["info", "-m", "missing.gguf"],
        "missing.gguf: No such file",
    );
    fails(
        d,
        &["info", "-m", "text.gguf"],
        "text.gguf: GGUF byte 0 (header): not a GGUF file",
    );
    fails(d, &["info", "-m", "cut.gguf"], "runs past the end of the");
    fails(
        d,
        &["info", "-m", "dtype.gguf"],
        "tensor `token_embd.weight`): unknown or unsupported ggml type 99",
    );
    let supported: Vec<&str> = tempra_llm::model_config::Arch::ALL
        .iter()
        .map(|a| a.name())
        .collect();
    fails(
        d,
        &["info", "-m", "mamba.gguf"],
        &format!(
            "unsupported architecture `mamba` (supported: {})",
            supported.join(", ")
        ),
    );
    fails(d, &["info", "-m", "."], "not a regular file");
    fails(
        d,
        &["info", "-m", "good.gguf", "--tokenizer", "text.gguf"],
        "--tokenizer is only for llama2.c",
    );
    fails(
        d,
        &["info", "-m", "text.gguf", "--tokenizer", "text.gguf"],
        "llama2.c checkpoint byte",
    );
    fails(
        d,
        &["convert", "-m", "cut.gguf", "-o", "out.gguf"],
        "cut.gguf",
    );
    fails(
        d,
        &[
            "quantize",
            "-m",
            "good.gguf",
            "-o",
            "no/such/dir/out.gguf",
            "--type",
            "q8_0",
        ],
        "creating no/such/dir",
    );
    assert!(!d.join("out.gguf").exists() && !d.join("out.gguf.partial").exists());
}

#[test]
fn bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fails(d, &[], "missing subcommand");
    fails(d, &["frobnicate"], "unrecognized subcommand");
    fails(
        d,
        &["info"],
        "required arguments were not provided: --model <MODEL>",
    );
    fails(d, &["info", "-m", "x.gguf", "--bogus"], "--bogus");
    fails(
        d,
        &["quantize", "-m", "x.gguf", "-o", "y.gguf", "--type", "q9_9"],
        "unknown quantization type `q9_9`",
    );
}

#[test]
fn help_and_version_succeed() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["info", "--help"],
        &["quantize", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tempra"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
}
