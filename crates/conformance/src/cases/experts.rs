//! The mixture-of-experts ops: `top_k` (values and indices, with ties, NaNs, infinities
//! and signed zeros, a `k` past the CPU's stack selection, strided rows), `gather` along
//! the last dim (plain and strided), `weighted_sum` over slots, and `expert_linear` over
//! each weight format, plain and in the backend's prepared layout, in decode (one token)
//! and prefill (tokens sharing experts, some experts unchosen) shapes, one row per slot or
//! one per token shared by its slots, with and without the `[E, N]` bias.

use tempra_tensor::{DType, ExecContext, Tensor};

use super::WEIGHT_BLOCK_FORMATS;
use crate::budget::Precision;
use crate::case::{Case, Inputs, u32s};
use crate::error::Result;

/// `[rows, n]` router scores with ties (every third value rounded to a half), a NaN,
/// ±∞ and ±0 among them.
fn scores(inputs: &mut Inputs, rows: usize, n: usize) -> Result<Tensor> {
    let base = inputs.normal(&[rows, n])?.to_vec_f32()?;
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
    let v: Vec<f32> = base
        .iter()
        .enumerate()
        .map(|(i, &x)| match i % 13 {
            4 => specials[(i / 13) % specials.len()],
            0 | 3 | 6 | 9 => (x * 2.0).round() / 2.0,
            _ => x,
        })
        .collect();
    Ok(Tensor::owned_from_slice(&v, &[rows, n])?)
}

/// Expert ids `[tokens, slots]` as `top_k` gives them: distinct within a token, spread
/// so experts get several rows, and the last expert never chosen.
fn routing(tokens: usize, slots: usize, experts: usize) -> Result<Tensor> {
    let used = experts - 1;
    let ids: Vec<u32> = (0..tokens)
        .flat_map(|t| (0..slots).map(move |s| ((t * 5 + s * 2 + t / 2) % used) as u32))
        .collect();
    // Distinct within a token: a step of 2 over an odd count never repeats in `slots`.
    debug_assert!(used % 2 == 1 && slots <= used);
    u32s(&ids, &[tokens, slots])
}

/// `expert_linear(x, w, ids, bias)` with `w` in the layout the backend prefers for it.
fn prepared_experts(
    c: &ExecContext,
    x: &Tensor,
    w: &Tensor,
    ids: &Tensor,
    bias: Option<&Tensor>,
) -> tempra_tensor::Result<Tensor> {
    match c.prepare_weight(w)? {
        Some(prepared) => c.expert_linear(x, &prepared, ids, bias),
        None => c.expert_linear(x, w, ids, bias),
    }
}

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0xE7);
    for (rows, n, k) in [(5usize, 64usize, 8usize), (3, 257, 40), (1, 33, 33)] {
        let x = scores(&mut inputs, rows, n)?;
        cases.push(Case::new(
            "top_k",
            format!("[{rows}, {n}] k={k}"),
            Precision::Exact,
            vec![x],
            move |c, i| {
                let (values, indices) = c.top_k(&i[0], k)?;
                Ok(vec![values, indices])
            },
        ));
    }
    let x = scores(&mut inputs, 33, 40)?;
    cases.push(Case::new(
        "top_k",
        "[33, 40]ᵀ k=5",
        Precision::Exact,
        vec![x],
        |c, i| {
            let (values, indices) = c.top_k(&i[0].t()?, 5)?;
            Ok(vec![values, indices])
        },
    ));

    let picks: Vec<u32> = (0..6 * 4).map(|i| (i * 7 % 33) as u32).collect();
    cases.push(Case::new(
        "gather",
        "[6, 33] at [6, 4]",
        Precision::Exact,
        vec![inputs.normal(&[6, 33])?, u32s(&picks, &[6, 4])?],
        |c, i| Ok(vec![c.gather(&i[0], &i[1])?]),
    ));
    let picks: Vec<u32> = (0..4 * 6).map(|i| (i * 5 % 9) as u32).collect();
    cases.push(Case::new(
        "gather",
        "[9, 6]ᵀ at [4, 6]ᵀ",
        Precision::Exact,
        vec![inputs.normal(&[9, 6])?, u32s(&picks, &[4, 6])?],
        |c, i| Ok(vec![c.gather(&i[0].t()?, &i[1].t()?)?]),
    ));

    for (tokens, slots, d) in [(1usize, 8usize, 64usize), (7, 4, 65)] {
        let x = inputs.normal(&[tokens, slots, d])?;
        let w = inputs.uniform(&[tokens, slots], 0.0, 1.0)?;
        cases.push(Case::new(
            "weighted_sum",
            format!("[{tokens}, {slots}, {d}]"),
            Precision::Accumulated,
            vec![x, w],
            |c, i| Ok(vec![c.weighted_sum(&i[0], &i[1])?]),
        ));
    }
    let x = inputs.normal(&[5, 33, 4])?;
    cases.push(Case::new(
        "weighted_sum",
        "[5, 33, 4] slots and dims swapped",
        Precision::Accumulated,
        vec![x, inputs.uniform(&[5, 4], 0.0, 1.0)?],
        |c, i| Ok(vec![c.weighted_sum(&i[0].transpose(1, 2)?, &i[1])?]),
    ));

    // Six experts (the last unchosen); decode: one token over four of them; prefill: nine
    // tokens over two each, once with a row per slot (down) and a bias, once with one
    // row per token shared by its slots (gate and up). N a multiple of the CPU's
    // interleave group, so the prepared stacks are interleaved per expert.
    let experts = 6;
    let float = [DType::F32, DType::F16, DType::BF16];
    for dtype in float.into_iter().chain(WEIGHT_BLOCK_FORMATS) {
        let (precision, k, n) = if dtype.is_quantized() {
            (Precision::QuantizedProduct(dtype), 256, 24)
        } else {
            (Precision::Accumulated, 67, 19)
        };
        let w = inputs.normal_as(&[experts, n, k], dtype)?;
        let name = format!("{dtype} w [{experts}, {n}, {k}]");
        let x = inputs.normal(&[1, 4, k])?;
        cases.push(Case::new(
            "expert_linear",
            format!("{name} decode, 4 of {experts} prepared"),
            precision,
            vec![x, w.clone(), routing(1, 4, experts)?],
            |c, i| Ok(vec![prepared_experts(c, &i[0], &i[1], &i[2], None)?]),
        ));
        let x = inputs.normal(&[9, 2, k])?;
        let bias = inputs.normal(&[experts, n])?;
        cases.push(Case::new(
            "expert_linear",
            format!("{name} prefill [9, 2] + bias"),
            precision,
            vec![x, w.clone(), routing(9, 2, experts)?, bias],
            |c, i| Ok(vec![c.expert_linear(&i[0], &i[1], &i[2], Some(&i[3]))?]),
        ));
        let x = inputs.normal(&[9, 1, k])?;
        cases.push(Case::new(
            "expert_linear",
            format!("{name} prefill [9, 2] shared rows prepared"),
            precision,
            vec![x, w, routing(9, 2, experts)?],
            |c, i| Ok(vec![prepared_experts(c, &i[0], &i[1], &i[2], None)?]),
        ));
    }
    Ok(())
}
