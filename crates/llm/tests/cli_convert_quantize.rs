//! `tempra convert` and `tempra quantize` end to end.
#![cfg(feature = "cli")]

use tempra_llm::ModelFile;
use tempra_llm::testing::{ModelShape, RandomModelSpec, shared_file, write_random_model};
use tempra_tensor::DType;

mod cli_helpers;
use cli_helpers::ok;

#[test]
fn convert_stories260k() {
    let (Some(bin), Some(tok)) = (
        shared_file("models/stories260K/stories260K.bin"),
        shared_file("models/stories260K/tok512.bin"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = ok(
        d,
        &[
            "convert",
            "-m",
            bin.to_str().unwrap(),
            "--tokenizer",
            tok.to_str().unwrap(),
            "-o",
            "s.gguf",
        ],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote s.gguf: 47 tensors"));
    let direct = ModelFile::open_llama2c(&bin, &tok).unwrap();
    let gguf = ModelFile::open(d.join("s.gguf")).unwrap();
    assert_eq!(gguf.metadata(), direct.metadata());
    for (a, b) in direct.tensor_infos().iter().zip(gguf.tensor_infos()) {
        assert_eq!(a.spec, b.spec);
        assert_eq!(
            direct.tensor_bytes(a).unwrap(),
            gguf.tensor_bytes(b).unwrap()
        );
    }
    assert!(!d.join("s.gguf.partial").exists());
    let info = String::from_utf8(ok(d, &["info", "-m", "s.gguf"]).stdout).unwrap();
    assert!(info.contains("format:         GGUF v3"), "{info}");
}

#[test]
fn quantize_a_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = write_random_model(&RandomModelSpec::llama(ModelShape::TINY), Vec::new()).unwrap();
    std::fs::write(d.join("f32.gguf"), bytes).unwrap();
    let out = ok(
        d,
        &[
            "quantize",
            "-m",
            "f32.gguf",
            "-o",
            "q.gguf",
            "--type",
            "q4_k_m",
            "--verbose",
        ],
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("wrote q.gguf: 16 of 21 tensors converted to q4_k_m"),
        "{stderr}"
    );
    assert!(
        stderr.contains("blk.1.attn_v.weight: f32 -> q6_K\n"),
        "{stderr}"
    );
    let q = ModelFile::open(d.join("q.gguf")).unwrap();
    assert_eq!(q.tensor_info("output.weight").unwrap().dtype(), DType::Q6K);
    assert_eq!(
        q.tensor_info("blk.0.ffn_gate.weight").unwrap().dtype(),
        DType::Q4K
    );
    let info = String::from_utf8(ok(d, &["info", "-m", "q.gguf"]).stdout).unwrap();
    assert!(info.contains("file type:      q4_k_m (15)"), "{info}");
    assert!(!d.join("q.gguf.partial").exists());
}

#[test]
fn quantize_a_tiny_model_to_iq4_xs_and_run_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = write_random_model(&RandomModelSpec::llama(ModelShape::TINY), Vec::new()).unwrap();
    std::fs::write(d.join("f32.gguf"), bytes).unwrap();
    let out = ok(
        d,
        &[
            "quantize", "-m", "f32.gguf", "-o", "q.gguf", "--type", "iq4_xs",
        ],
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("wrote q.gguf: 16 of 21 tensors converted to iq4_xs"),
        "{stderr}"
    );
    let q = ModelFile::open(d.join("q.gguf")).unwrap();
    // llama.cpp's mix: the output in Q6_K, the first eighth of ffn_down in Q5_K (none of
    // two layers), attn_v in IQ4_XS as the tiny model's GQA is 2.
    assert_eq!(q.tensor_info("output.weight").unwrap().dtype(), DType::Q6K);
    for name in [
        "blk.0.ffn_down.weight",
        "blk.1.attn_v.weight",
        "token_embd.weight",
    ] {
        assert_eq!(q.tensor_info(name).unwrap().dtype(), DType::IQ4XS, "{name}");
    }
    let info = String::from_utf8(ok(d, &["info", "-m", "q.gguf"]).stdout).unwrap();
    assert!(info.contains("file type:      iq4_xs (30)"), "{info}");
    assert!(info.contains("iq4_xs 15 ("), "{info}");
    let run = ok(
        d,
        &["run", "-m", "q.gguf", "-p", "a b", "-n", "4", "--seed", "1"],
    );
    assert!(run.status.success());
}
