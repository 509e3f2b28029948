//! The real stories260K llama2.c checkpoint (from the shared directory): header values,
//! weight checksums computed independently with numpy, vocabulary conversion, and the
//! GGUF conversion read back tensor for tensor.
//!
//! Skips with a message when the shared models are absent, fails when REQUIRE_MODELS=1.

use std::path::PathBuf;
use std::sync::Arc;

use tempra_llm::gguf::{Limits, TokenType, keys};
use tempra_llm::llama2c::{Llama2cConfig, Llama2cVocab};
use tempra_llm::model_config::{Arch, ModelConfig};
use tempra_llm::quantize::{QuantType, quantize_model};
use tempra_llm::testing::shared_file;
use tempra_llm::{ModelFile, ModelFormat};
use tempra_tensor::DType;

fn stories() -> Option<(PathBuf, PathBuf)> {
    Some((
        shared_file("models/stories260K/stories260K.bin")?,
        shared_file("models/stories260K/tok512.bin")?,
    ))
}

/// Sum in f64, as numpy's `a.astype(np.float64).sum()` (up to summation order).
fn sum(model: &ModelFile, name: &str) -> f64 {
    model
        .tensor(name)
        .unwrap()
        .to_vec_f32()
        .unwrap()
        .iter()
        .map(|&v| v as f64)
        .sum()
}

#[test]
fn header_and_weights() {
    let Some((bin, tok)) = stories() else { return };
    let bytes = std::fs::read(&bin).unwrap();
    let c = Llama2cConfig::parse(&bytes).unwrap();
    assert_eq!(
        (
            c.dim,
            c.hidden_dim,
            c.n_layers,
            c.n_heads,
            c.n_kv_heads,
            c.vocab_size,
            c.seq_len
        ),
        (64, 172, 5, 8, 4, 512, 512)
    );
    assert!(c.shared_classifier);

    let model = ModelFile::open_llama2c(&bin, &tok).unwrap();
    assert_eq!(model.format(), ModelFormat::Llama2c);
    assert_eq!(model.tensor_infos().len(), 1 + 5 * 9 + 1);
    assert!(!model.has_tensor("output.weight"), "tied classifier");
    let emb = model.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.dims(), &[512, 64]);
    assert_eq!(emb.storage().kind(), "mapped");
    let values = emb.to_vec_f32().unwrap();
    assert_eq!(
        values[..4],
        [-0.294_748_78, 0.561_895_6, 0.175_422_53, 0.340_573_6]
    );
    assert_eq!(values[511 * 64 + 63], -0.424_032_6);
    let w2 = model.tensor("blk.4.ffn_down.weight").unwrap();
    assert_eq!(w2.dims(), &[64, 172]);
    assert_eq!(w2.to_vec_f32().unwrap()[63 * 172 + 171], -0.003_506_871_6);
    for (name, want) in [
        ("token_embd.weight", -752.367_744_664_006_8),
        ("blk.0.attn_q.weight", -23.827_822_908_671_806),
        ("blk.4.attn_k.weight", 2.272_262_852_308_813_3),
        ("blk.4.ffn_down.weight", 19.543_787_761_240_765),
        ("blk.0.attn_norm.weight", 70.268_861_293_792_72),
        ("output_norm.weight", 115.952_762_305_736_54),
    ] {
        let got = sum(&model, name);
        assert!(
            (got - want).abs() < 1e-9 * want.abs().max(1.0),
            "{name}: {got} vs {want}"
        );
    }
    let abs: f64 = model
        .tensor("blk.2.ffn_up.weight")
        .unwrap()
        .to_vec_f32()
        .unwrap()
        .iter()
        .map(|v| v.abs() as f64)
        .sum();
    assert!(
        (abs - 1_050.438_423_863_997_7).abs() < 1e-9 * abs,
        "w3[2] abs sum {abs}"
    );

    let config = ModelConfig::from_metadata(model.metadata()).unwrap();
    assert_eq!(config.arch, Arch::Llama);
    assert_eq!(
        (
            config.embedding_length,
            config.block_count,
            config.feed_forward_length
        ),
        (64, 5, 172)
    );
    assert_eq!(
        (
            config.head_count,
            config.head_count_kv,
            config.key_length,
            config.vocab_size
        ),
        (8, 4, 8, 512)
    );
    assert_eq!(
        (
            config.context_length,
            config.rms_norm_eps,
            config.rope.freq_base
        ),
        (512, 1e-5, 10_000.0)
    );
}

#[test]
fn vocabulary_converts_like_llama_cpp() {
    let Some((_, tok)) = stories() else { return };
    let v = Llama2cVocab::open(&tok, 512).unwrap();
    assert_eq!((v.len(), v.max_token_length), (512, 7));
    assert_eq!(
        v.tokens[..3],
        [b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()]
    );
    assert_eq!(
        v.token_types[..4],
        [
            TokenType::Unknown,
            TokenType::Control,
            TokenType::Control,
            TokenType::Byte
        ]
    );
    assert_eq!(v.tokens[3], b"<0x00>");
    assert_eq!(v.tokens[258], b"<0xFF>");
    assert!(v.token_types[3..259].iter().all(|&t| t == TokenType::Byte));
    assert_eq!(v.tokens[259], "\u{2581}t".as_bytes(), "spaces become ▁");
    assert_eq!((v.scores[259], v.scores[260]), (0.0, -1.0));
    assert!(v.token_types[259..].iter().all(|&t| t == TokenType::Normal));
    assert!(
        Llama2cVocab::open(&tok, 511).is_err(),
        "a vocabulary size that does not match is an error"
    );
}

#[test]
fn gguf_conversion_reads_back_equal() {
    let Some((bin, tok)) = stories() else { return };
    let model = ModelFile::open_llama2c(&bin, &tok).unwrap();
    let gguf = model.write_gguf(Vec::new()).unwrap();
    let back = ModelFile::from_gguf_bytes(Arc::new(gguf), &Limits::default()).unwrap();
    assert_eq!(back.metadata(), model.metadata());
    assert_eq!(
        back.metadata().get_str(keys::TOKENIZER_MODEL).unwrap(),
        "llama"
    );
    assert_eq!(
        back.metadata().get_str(keys::GENERAL_NAME).unwrap(),
        "stories260K"
    );
    assert_eq!(back.tensor_infos().len(), model.tensor_infos().len());
    for (a, b) in model.tensor_infos().iter().zip(back.tensor_infos()) {
        assert_eq!(a.spec, b.spec);
        assert_eq!(
            model.tensor_bytes(a).unwrap(),
            back.tensor_bytes(b).unwrap(),
            "{}",
            a.name()
        );
    }
}

#[test]
fn quantizing_odd_rows_falls_back() {
    let Some((bin, tok)) = stories() else { return };
    let model = ModelFile::open_llama2c(&bin, &tok).unwrap();
    let out = quantize_model(&model, QuantType::Q4KM, Vec::new(), &mut |_, _| {}).unwrap();
    assert_eq!(out.tensors, 47);
    assert!(out.fallbacks > 0);
    let plans = tempra_llm::quantize::plan_model(&model, QuantType::Q4KM);
    let to = |name: &str| plans.iter().find(|p| p.name == name).unwrap().to;
    // Rows of 64 fit no K-quant: Q4_K → Q5_0, the tied embedding's Q6_K → Q8_0; rows of
    // 172 (ffn_down) fit no block at all → F16; norms stay F32.
    assert_eq!(to("blk.1.attn_q.weight"), DType::Q5_0);
    assert_eq!(to("token_embd.weight"), DType::Q8_0);
    assert_eq!(to("blk.1.ffn_down.weight"), DType::F16);
    assert_eq!(to("blk.1.ffn_norm.weight"), DType::F32);
}
