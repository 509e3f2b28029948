//! `matmul` (float formats, batched, transposed views) and `linear` over every weight
//! format: float weights, each GGUF block format, the backend's prepared (interleaved)
//! layout, decode (one row) and prefill (many rows) shapes, with and without bias.

use tempra_tensor::{DType, ExecContext, Tensor};

use super::WEIGHT_BLOCK_FORMATS;
use crate::budget::Precision;
use crate::case::{Case, Inputs};
use crate::error::Result;

/// `linear(x, w, bias)` with `w` in the layout the backend prefers for it (what the
/// engines run: `prepare_weight` interleaves block rows on the CPU).
fn prepared_linear(
    c: &ExecContext,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
) -> tempra_tensor::Result<Tensor> {
    match c.prepare_weight(w)? {
        Some(prepared) => c.linear(x, &prepared, bias),
        None => c.linear(x, w, bias),
    }
}

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0x11A);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (m, k, n) in [(1usize, 33usize, 17usize), (17, 33, 19), (64, 70, 65)] {
            let a = inputs.normal_as(&[m, k], dtype)?;
            let b = inputs.normal_as(&[k, n], dtype)?;
            let name = format!("{dtype} [{m}, {k}] × [{k}, {n}]");
            cases.push(Case::new(
                "matmul",
                name,
                Precision::Accumulated,
                vec![a, b],
                |c, i| Ok(vec![c.matmul(&i[0], &i[1])?]),
            ));
        }
    }
    let a = inputs.normal(&[3, 5, 7])?;
    let b = inputs.normal(&[3, 7, 9])?;
    cases.push(Case::new(
        "matmul",
        "batched [3, 5, 7] × [3, 7, 9]",
        Precision::Accumulated,
        vec![a, b],
        |c, i| Ok(vec![c.matmul(&i[0], &i[1])?]),
    ));
    let a = inputs.normal(&[17, 33])?;
    let b = inputs.normal(&[19, 33])?;
    cases.push(Case::new(
        "matmul",
        "[17, 33] × [19, 33]ᵀ",
        Precision::Accumulated,
        vec![a, b],
        |c, i| Ok(vec![c.matmul(&i[0], &i[1].t()?)?]),
    ));
    let a = inputs.normal(&[33, 17])?;
    cases.push(Case::new(
        "matmul",
        "[33, 17]ᵀ × [33, 19]",
        Precision::Accumulated,
        vec![a, inputs.normal(&[33, 19])?],
        |c, i| Ok(vec![c.matmul(&i[0].t()?, &i[1])?]),
    ));

    // Every weight format: GEMV (one row) and GEMM (rows) shapes, plain and in the
    // backend's prepared layout, a bias, a batched input, a transposed input, the
    // engines' zero-copy narrow of a weight's rows (a tied output's vocab slice). Float
    // weights take odd K; block weights a whole number of 256-value blocks, N odd and
    // past an interleave group.
    let float = [DType::F32, DType::F16, DType::BF16];
    for dtype in float.into_iter().chain(WEIGHT_BLOCK_FORMATS) {
        let (precision, shapes, k) = if dtype.is_quantized() {
            let shapes = [
                (1usize, 256usize, 33usize),
                (1, 512, 67),
                (9, 256, 19),
                (40, 512, 24),
            ];
            (Precision::QuantizedProduct(dtype), shapes, 256)
        } else {
            let shapes = [(1, 33, 17), (1, 256, 257), (7, 96, 33), (33, 70, 65)];
            (Precision::Accumulated, shapes, 64)
        };
        for (m, k, n) in shapes {
            let x = inputs.normal(&[m, k])?;
            let w = inputs.normal_as(&[n, k], dtype)?;
            let name = format!("{dtype} x [{m}, {k}] w [{n}, {k}]");
            let both = vec![x, w];
            cases.push(Case::new(
                "linear",
                name.clone(),
                precision,
                both.clone(),
                |c, i| Ok(vec![c.linear(&i[0], &i[1], None)?]),
            ));
            cases.push(Case::new(
                "linear",
                format!("{name} prepared"),
                precision,
                both,
                |c, i| Ok(vec![prepared_linear(c, &i[0], &i[1], None)?]),
            ));
        }
        let x = inputs.normal(&[2, 5, k])?;
        let w = inputs.normal_as(&[31, k], dtype)?;
        let bias = inputs.normal(&[31])?;
        let name = format!("{dtype} batched x [2, 5, {k}] + bias");
        cases.push(Case::new(
            "linear",
            name,
            precision,
            vec![x, w, bias],
            |c, i| Ok(vec![prepared_linear(c, &i[0], &i[1], Some(&i[2]))?]),
        ));
        let x = inputs.normal(&[k, 9])?;
        let w = inputs.normal_as(&[31, k], dtype)?;
        let name = format!("{dtype} x [{k}, 9]ᵀ");
        cases.push(Case::new("linear", name, precision, vec![x, w], |c, i| {
            Ok(vec![c.linear(&i[0].t()?, &i[1], None)?])
        }));
        let x = inputs.normal(&[2, k])?;
        let w = inputs.normal_as(&[24, k], dtype)?;
        let name = format!("{dtype} x [2, {k}] w rows 8..24");
        cases.push(Case::new("linear", name, precision, vec![x, w], |c, i| {
            Ok(vec![c.linear(&i[0], &i[1].narrow(0, 8, 16)?, None)?])
        }));
    }
    Ok(())
}
