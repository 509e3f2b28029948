//! Quantizing a random tiny model to every type: the planned dtypes land in the file,
//! metadata records the file type, and dequantized weights stay close to the originals.

use std::sync::Arc;

use tempra_llm::gguf::{Limits, keys};
use tempra_llm::quantize::{QuantType, plan_model, quantize_model};
use tempra_llm::testing::{ModelShape, RandomModelSpec, random_model};
use tempra_llm::{LlmError, ModelFile};
use tempra_tensor::DType;

/// Relative RMS error of `b` against `a`.
fn rel_rmse(a: &[f32], b: &[f32]) -> f64 {
    let (mut err, mut norm) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        err += ((x - y) as f64).powi(2);
        norm += (x as f64).powi(2);
    }
    (err / norm).sqrt()
}

/// Worst acceptable relative RMS error per dtype on uniform weights (4-bit formats lose
/// ~8-12%, MXFP4 ~15%, 2-bit ~35%).
fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 0.0,
        DType::F16 | DType::BF16 => 0.005,
        DType::Q8_0 => 0.01,
        DType::Q6K => 0.03,
        DType::Q5_0 | DType::Q5_1 | DType::Q5K => 0.06,
        DType::Q4_0 | DType::Q4_1 | DType::Q4K | DType::IQ4NL | DType::IQ4XS => 0.12,
        // E2M1 levels under a power-of-two scale.
        DType::MXFP4 => 0.2,
        DType::Q3K => 0.25,
        DType::Q2K => 0.45,
        other => panic!("unexpected {other}"),
    }
}

/// MXFP4_MOE, as llama-quantize plans it: a mixture of experts' stacked expert tensors in
/// MXFP4, the routers and norms kept, every other matrix (the output head too) in Q8_0;
/// the file loads and runs.
#[test]
fn mxfp4_moe_puts_the_expert_stacks_in_mxfp4() {
    let spec = RandomModelSpec::llama(ModelShape::TINY_MOE).with_seed(5);
    let source = random_model(&spec).unwrap();
    let mut bytes = Vec::new();
    quantize_model(&source, QuantType::MXFP4MOE, &mut bytes, &mut |_, _| {}).unwrap();
    let out = ModelFile::from_gguf_bytes(Arc::new(bytes), &Limits::default()).unwrap();
    let mut stacks = 0;
    for info in out.tensor_infos() {
        let name = info.name();
        let want = if name.contains("_exps.") {
            stacks += 1;
            DType::MXFP4
        } else if name.contains("norm") || name.contains("ffn_gate_inp") {
            DType::F32
        } else {
            DType::Q8_0
        };
        assert_eq!(info.dtype(), want, "{name}");
        let original = source.tensor(name).unwrap().to_vec_f32().unwrap();
        let restored = out.tensor(name).unwrap().to_vec_f32().unwrap();
        let err = rel_rmse(&original, &restored);
        eprintln!("{name} as {}: relative RMS error {err:.4}", info.dtype());
        assert!(err <= tolerance(info.dtype()), "{name}: {err}");
    }
    assert_eq!(stacks, 3 * ModelShape::TINY_MOE.layers);
    let model = tempra_llm::engine::Model::from_file(out, &Default::default()).unwrap();
    let logits = model.session().unwrap().prefill(&[1, 2, 3]).unwrap();
    assert!(logits.to_vec_f32().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn every_type_quantizes_a_tiny_model() {
    let source = random_model(&RandomModelSpec::llama(ModelShape::TINY).with_seed(3)).unwrap();
    for qtype in QuantType::ALL {
        let plans = plan_model(&source, qtype);
        let mut seen = Vec::new();
        let mut bytes = Vec::new();
        let summary = quantize_model(&source, qtype, &mut bytes, &mut |i, plan| {
            seen.push((i, plan.name.clone()))
        })
        .unwrap();
        assert_eq!(summary.tensors, seen.len(), "one progress call per tensor");
        assert_eq!(
            summary.fallbacks, 0,
            "every row of the tiny model fits every block"
        );
        let out = ModelFile::from_gguf_bytes(Arc::new(bytes), &Limits::default()).unwrap();
        assert_eq!(
            out.metadata().get_u32(keys::GENERAL_FILE_TYPE).unwrap(),
            qtype.file_type()
        );
        assert_eq!(
            out.metadata().get_str(keys::TOKENIZER_MODEL).unwrap(),
            "llama",
            "the rest of the metadata is copied"
        );
        for (info, plan) in out.tensor_infos().iter().zip(&plans) {
            assert_eq!(info.dtype(), plan.to, "{qtype} {}", plan.name);
            let original = source.tensor(info.name()).unwrap().to_vec_f32().unwrap();
            let restored = out.tensor(info.name()).unwrap().to_vec_f32().unwrap();
            let err = rel_rmse(&original, &restored);
            assert!(
                err <= tolerance(info.dtype()),
                "{qtype} {} as {}: {err}",
                info.name(),
                info.dtype()
            );
        }
    }
}

#[test]
fn q4_k_m_mix_on_the_tiny_model() {
    let source = random_model(&RandomModelSpec::llama(ModelShape::TINY)).unwrap();
    let plans = plan_model(&source, QuantType::Q4KM);
    let to = |name: &str| plans.iter().find(|p| p.name == name).unwrap().to;
    assert_eq!(to("output.weight"), DType::Q6K);
    assert_eq!(to("token_embd.weight"), DType::Q4K);
    // Two layers: by llama.cpp's integer arithmetic n/8 = 0 and 7n/8 = 1, so only layer 1
    // gets more bits.
    assert_eq!(to("blk.0.attn_v.weight"), DType::Q4K);
    assert_eq!(to("blk.1.attn_v.weight"), DType::Q6K);
    assert_eq!(to("blk.1.ffn_down.weight"), DType::Q6K);
    assert_eq!(to("blk.0.attn_norm.weight"), DType::F32);
}

#[test]
fn quantized_input_is_not_requantized() {
    let q8 = random_model(&RandomModelSpec::llama(ModelShape::TINY).with_qtype(QuantType::Q8_0))
        .unwrap();
    let e = quantize_model(&q8, QuantType::Q4_0, Vec::new(), &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, LlmError::TensorData { .. }), "{e}");
    assert!(e.to_string().contains("already q8_0"), "{e}");
    // Same type: a plain copy is fine.
    quantize_model(&q8, QuantType::Q8_0, Vec::new(), &mut |_, _| {}).unwrap();
}

#[test]
fn random_models_are_reproducible() {
    let spec = RandomModelSpec::llama(
        ModelShape::parse("dim=64,layers=1,heads=2,ffn=128,vocab=300").unwrap(),
    );
    let a = tempra_llm::testing::write_random_model(&spec, Vec::new()).unwrap();
    let b = tempra_llm::testing::write_random_model(&spec, Vec::new()).unwrap();
    let c =
        tempra_llm::testing::write_random_model(&spec.clone().with_seed(1), Vec::new()).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}
