//! Copies and conversions (contiguous, casts between float formats, dequantizing),
//! concatenation, writes into a cache slice, quantization.

use tempra_tensor::{DType, quant};

use super::WEIGHT_BLOCK_FORMATS;
use crate::budget::Precision;
use crate::case::{Case, Inputs};
use crate::error::Result;

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0xC0B);
    let x = inputs.normal(&[33, 17])?;
    cases.push(Case::new(
        "copy",
        "contiguous of [33, 17]ᵀ",
        Precision::Exact,
        vec![x],
        |c, i| Ok(vec![c.contiguous(&i[0].t()?)?]),
    ));
    let x = inputs.normal(&[3, 4, 5])?;
    cases.push(Case::new(
        "copy",
        "contiguous of a permuted [3, 4, 5]",
        Precision::Exact,
        vec![x],
        |c, i| Ok(vec![c.contiguous(&i[0].permute(&[2, 0, 1])?)?]),
    ));
    let x = inputs.normal(&[17])?;
    cases.push(Case::new(
        "copy",
        "broadcast [17] to [3, 17]",
        Precision::Exact,
        vec![x],
        |c, i| Ok(vec![c.contiguous(&i[0].broadcast_to(&[3, 17])?)?]),
    ));
    for (from, to) in [
        (DType::F32, DType::F16),
        (DType::F32, DType::BF16),
        (DType::F16, DType::F32),
        (DType::BF16, DType::F32),
        (DType::F16, DType::BF16),
    ] {
        let x = inputs.normal_as(&[5, 33], from)?;
        let precision = match to {
            DType::F32 => Precision::Exact,
            half => Precision::HalfOutput(half),
        };
        cases.push(Case::new(
            "copy",
            format!("cast {from} → {to} [5, 33]"),
            precision,
            vec![x],
            move |c, i| Ok(vec![c.cast(&i[0], to)?]),
        ));
    }
    for dtype in [DType::Q8_0, DType::Q4K, DType::Q6K] {
        let x = inputs.normal_as(&[3, 256], dtype)?;
        cases.push(Case::new(
            "copy",
            format!("dequantize {dtype} → f32"),
            Precision::Dequantized(dtype),
            vec![x],
            |c, i| Ok(vec![c.cast(&i[0], DType::F32)?]),
        ));
    }
    let a = inputs.normal(&[3, 5])?;
    let b = inputs.normal(&[3, 2])?;
    cases.push(Case::new(
        "copy",
        "concat [3, 5] ‖ [3, 2] on dim 1",
        Precision::Exact,
        vec![a, b],
        |c, i| Ok(vec![c.concat(&[&i[0], &i[1]], 1)?]),
    ));
    // The KV write: f32 rows into an f16 cache at row 3.
    let rows = inputs.normal(&[2, 2, 16])?;
    cases.push(Case::new(
        "copy",
        "write 2 rows into an f16 cache at 3",
        Precision::HalfOutput(DType::F16),
        vec![rows],
        |c, i| {
            let mut cache = c.zeros(&[8, 2, 16], DType::F16)?;
            c.write_slice(&mut cache, 0, 3, &i[0])?;
            Ok(vec![cache])
        },
    ));
    // The KV write into a quantized cache: f32 rows quantized into its blocks.
    for dtype in [DType::Q8_0, DType::Q4_0, DType::Q5_1] {
        let rows = inputs.normal(&[3, 2, 64])?;
        cases.push(Case::new(
            "copy",
            format!("write 3 rows into a {dtype} cache at 5"),
            Precision::Exact,
            vec![rows],
            move |c, i| {
                let mut cache = c.zeros_persistent(&[8, 2, 64], dtype)?;
                c.write_slice(&mut cache, 0, 5, &i[0])?;
                Ok(vec![cache])
            },
        ));
    }
    // The formats with a quantizer (the IQ1/IQ2/IQ3 ones are read-only).
    for dtype in WEIGHT_BLOCK_FORMATS
        .into_iter()
        .filter(|&d| quant::has_quantizer(d))
    {
        let x = inputs.normal(&[2, 256])?;
        cases.push(Case::new(
            "quantize",
            format!("f32 → {dtype}"),
            Precision::Exact,
            vec![x],
            move |c, i| {
                let src = c.cast(&i[0], DType::F32)?;
                Ok(vec![c.quantize(&src, dtype)?])
            },
        ));
    }
    Ok(())
}
