//! What the quantized-model tests share: the reference a quantized model is held to (the
//! same model on its exactly dequantized weights, through the f32 path that
//! `engine_hf_reference` checks against transformers) and the error measures of the
//! budget (llama.cpp's `test-backend-ops` NMSE, and top-1 flips where the reference's
//! lead is clear).

// A module of each test binary that includes it: its items are public to that binary.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use tempra_autograd::{Var, no_grad};
use tempra_llm::engine::{LogitRows, Model, forward, logits_slice};
use tempra_tensor::DType;

/// The logits `[T × vocab]` of every position of `tokens` with every block-quantized
/// weight of `model` replaced by its f32 dequantization (no cache, the pool's outputs).
pub fn dequantized_reference(model: &Arc<Model>, tokens: &[u32]) -> Vec<f32> {
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
        .expect("dequantized weights");
    let _guard = no_grad();
    let logits = forward(
        ag,
        model.config(),
        &dequantized,
        tokens,
        None,
        LogitRows::All,
    )
    .expect("reference forward");
    logits_slice(logits.tensor()).expect("logits").to_vec()
}

/// (max |diff|, NMSE `Σ(a−b)² / Σb²`, positions whose top-1 differs while the
/// reference's leads its runner-up by more than `margin`).
pub fn errors(got: &[f32], want: &[f32], vocab: usize, margin: f32) -> (f32, f64, Vec<usize>) {
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

/// The top-1 margin the flip rule allows for an NMSE budget `max_nmse`: six standard
/// deviations of the error that budget allows (`6·√nmse·rms(reference)`).
pub fn flip_margin(reference: &[f32], max_nmse: f64) -> f32 {
    let rms = (reference.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>()
        / reference.len() as f64)
        .sqrt();
    (6.0 * max_nmse.sqrt() * rms) as f32
}
