//! Quantized models against the reference computed on their exactly dequantized weights
//! (the same model with every block-quantized tensor replaced by its f32 dequantization,
//! run through the f32 path that `engine_hf_reference` checks against transformers).
//!
//! Prefill of many rows dequantizes the weights into the f32 GEMM, so it must agree to
//! f32 rounding; except Q4_0 and Q4_K in the CPU's row-interleaved layouts, whose
//! prefill runs the integer products too and is held to the decode budget. Decode uses integer dot products on activations quantized to Q8 (as
//! llama.cpp does: Q8_0 blocks of 32 for Q4_0/Q8_0 weights, Q8_K blocks of 256 for
//! K-quants), whose error is bounded as llama.cpp's `test-backend-ops` bounds one quantized
//! matmul: normalized mean squared error (Σ(a−b)² / Σb²) at most 5e-4, here over the whole
//! model's logits; 1.5e-3 with Q8_K activations (one scale per 256 values, so coarser;
//! measured 3.8e-4 for Q8_0/Q4_0 and 7.2e-4 for Q4_K_M on this model). And the same top-1
//! token wherever the reference's top-1 leads the runner-up by more than six standard
//! deviations of the error that bound allows (6·√nmse·rms(logits)).

use tempra_autograd::{Var, no_grad};
use tempra_llm::engine::{LoadOptions, LogitRows, Model, forward, logits_slice};
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, random_model};
use tempra_tensor::DType;

/// (max |diff|, NMSE, positions whose top-1 differs while the reference's leads by more
/// than `margin`).
fn errors(got: &[f32], want: &[f32], vocab: usize, margin: f32) -> (f32, f64, Vec<usize>) {
    let max = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum();
    let den: f64 = want.iter().map(|b| f64::from(*b).powi(2)).sum();
    let mut flips = Vec::new();
    for (p, (g, w)) in got
        .chunks_exact(vocab)
        .zip(want.chunks_exact(vocab))
        .enumerate()
    {
        let argmax = |r: &[f32]| {
            r.iter().enumerate().fold(
                (0, f32::NEG_INFINITY),
                |b, (i, &v)| if v > b.1 { (i, v) } else { b },
            )
        };
        let (top, best) = argmax(w);
        let runner_up = w
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != top)
            .map(|(_, &v)| v)
            .fold(f32::NEG_INFINITY, f32::max);
        if argmax(g).0 != top && best - runner_up > margin {
            flips.push(p);
        }
    }
    (max, num / den, flips)
}

fn check(qtype: QuantType, max_nmse: f64) {
    let spec = RandomModelSpec::llama(ModelShape::TINY)
        .with_qtype(qtype)
        .with_seed(11);
    let file = random_model(&spec).unwrap();
    let options = LoadOptions {
        kv_type: DType::F32,
        threads: Some(2),
        ..LoadOptions::default()
    };
    let model = Model::from_file(file, &options).unwrap();
    // Q4_0, Q8_0, Q4_K, Q5_K and Q6_K matrices run in the CPU's row-interleaved layouts
    // where it has the kernels: what is checked below is then that layout, prefill and
    // decode.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
        && std::env::var_os("TEMPRA_CPU_ISA").is_none()
    {
        let layer = &model.forward_weights().layers[0];
        let want = match qtype {
            QuantType::Q4_0 => Some(DType::Q4_0R8),
            QuantType::Q8_0 => Some(DType::Q8_0R8),
            QuantType::Q4KM => Some(DType::Q4KR8),
            QuantType::Q5KM => Some(DType::Q5KR8),
            _ => None,
        };
        if let Some(want) = want {
            assert_eq!(layer.gate.tensor().dtype(), want, "{qtype}");
            assert_eq!(
                model.weights().layers[0].gate.tensor().dtype(),
                want.base_format()
            );
        }
        // Every Q6_K matrix `linear` reads (Q4_K_M's down projections of some layers,
        // its output head) runs as Q6KR8.
        let originals = model.weights().layers.iter().map(|l| &l.down);
        let prepared = model.forward_weights().layers.iter().map(|l| &l.down);
        let mut q6_k = 0;
        for (prepared, original) in prepared.zip(originals) {
            if original.tensor().dtype() == DType::Q6K {
                assert_eq!(prepared.tensor().dtype(), DType::Q6KR8, "{qtype}");
                q6_k += 1;
            }
        }
        // Q4_K_M and Q5_K_M give the last layer's down projection Q6_K (llama.cpp's mix).
        assert!(
            !matches!(qtype, QuantType::Q4KM | QuantType::Q5KM) || q6_k > 0,
            "no Q6_K down projection"
        );
    }
    let vocab = model.config().vocab_size;
    let tokens: Vec<u32> = (0..40u32).map(|i| (i * 97 + 5) % vocab as u32).collect();

    let ag = model.autograd();
    let dequantized = model
        .weights()
        .map(|v| {
            let t = v.tensor();
            Ok(if t.dtype().is_quantized() {
                Var::constant(ag.ctx().cast(t, DType::F32)?)
            } else {
                v.clone()
            })
        })
        .unwrap();
    let reference = {
        let _guard = no_grad();
        forward(
            ag,
            model.config(),
            &dequantized,
            &tokens,
            None,
            LogitRows::All,
        )
        .unwrap()
        .into_tensor()
    };
    let reference = logits_slice(&reference).unwrap().to_vec();

    let mut session = model.session().unwrap();
    let prefill = logits_slice(&session.logits_all(&tokens).unwrap())
        .unwrap()
        .to_vec();
    session.reset();
    let mut decode = Vec::with_capacity(reference.len());
    for &t in &tokens {
        decode.extend_from_slice(logits_slice(&session.step(t).unwrap()).unwrap());
    }

    let rms = (reference.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>()
        / reference.len() as f64)
        .sqrt();
    let margin = (6.0 * max_nmse.sqrt() * rms) as f32;
    let (p_max, p_nmse, p_flips) = errors(&prefill, &reference, vocab, margin);
    let (d_max, d_nmse, d_flips) = errors(&decode, &reference, vocab, margin);
    eprintln!(
        "{qtype}: prefill max |diff| {p_max:.2e} nmse {p_nmse:.2e}; decode max |diff| {d_max:.2e} nmse {d_nmse:.2e} \
         (logit rms {rms:.3}, top-1 margin {margin:.3})"
    );
    // The CPU's interleaved layouts (Q4_0, Q4_K) run integer products at every row count
    // (as llama.cpp's prefill does): their prefill has the decode budget. Every other
    // prefill dequantizes exactly into the f32 GEMM.
    let int8_prefill = model.forward_weights().layers[0]
        .gate
        .tensor()
        .dtype()
        .row_group()
        > 1;
    if int8_prefill {
        assert!(
            p_nmse <= max_nmse,
            "{qtype} prefill: nmse {p_nmse} > {max_nmse}"
        );
    } else {
        assert!(
            p_nmse <= 1e-9 && p_max <= 1e-3,
            "{qtype} prefill: max |diff| {p_max}, nmse {p_nmse}"
        );
    }
    assert!(
        p_flips.is_empty(),
        "{qtype} prefill: top-1 differs at {p_flips:?}"
    );
    assert!(
        d_nmse <= max_nmse,
        "{qtype} decode: nmse {d_nmse} > {max_nmse}"
    );
    assert!(
        d_flips.is_empty(),
        "{qtype} decode: top-1 differs at {d_flips:?}"
    );
}

#[test]
fn q8_0_matches_its_dequantized_reference() {
    check(QuantType::Q8_0, 5e-4);
}

#[test]
fn q4_0_matches_its_dequantized_reference() {
    check(QuantType::Q4_0, 5e-4);
}

#[test]
fn q4_k_m_matches_its_dequantized_reference() {
    check(QuantType::Q4KM, 1.5e-3);
}

#[test]
fn q5_k_m_matches_its_dequantized_reference() {
    check(QuantType::Q5KM, 1.5e-3);
}
