//! Norms, rope (both pairings, partial rotation, frequency factors, linear, llama3 and
//! YaRN scaling, attention factors, the inverse) and embedding lookups over float and
//! block tables.

use tempra_tensor::{DType, RopeConfig, RopeScaling, RopeStyle};

use super::WEIGHT_BLOCK_FORMATS;
use crate::budget::Precision;
use crate::case::{Case, Inputs, u32s};
use crate::error::Result;

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0x4E4E);
    for dims in [vec![1usize, 33], vec![7, 257], vec![2, 3, 64]] {
        let last = *dims.last().unwrap_or(&1);
        let x = inputs.normal(&dims)?;
        let w = inputs.normal(&[last])?;
        cases.push(Case::new(
            "rms_norm",
            format!("{dims:?}"),
            Precision::Accumulated,
            vec![x, w],
            |c, i| Ok(vec![c.rms_norm(&i[0], &i[1], 1e-5)?]),
        ));
        let x = inputs.normal(&dims)?;
        let w = inputs.normal(&[last])?;
        let b = inputs.normal(&[last])?;
        cases.push(Case::new(
            "layer_norm",
            format!("{dims:?} + bias"),
            Precision::Accumulated,
            vec![x, w, b],
            |c, i| Ok(vec![c.layer_norm(&i[0], &i[1], Some(&i[2]), 1e-5)?]),
        ));
    }
    let x = inputs.normal(&[5, 48])?;
    let w = inputs.normal(&[48])?;
    cases.push(Case::new(
        "layer_norm",
        "[5, 48] no bias",
        Precision::Accumulated,
        vec![x, w],
        |c, i| Ok(vec![c.layer_norm(&i[0], &i[1], None, 1e-6)?]),
    ));

    let llama3 = RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position: 64.0,
    };
    let yarn = RopeScaling::Yarn {
        factor: 4.0,
        original_max_position: 64.0,
        beta_fast: 32.0,
        beta_slow: 1.0,
        ext_factor: 1.0,
    };
    let configs = [
        (
            "interleaved",
            RopeConfig::new(16, 10000.0, RopeStyle::Interleaved),
        ),
        ("neox", RopeConfig::new(16, 10000.0, RopeStyle::Neox)),
        (
            "neox partial 8 of 16",
            RopeConfig::new(8, 1e6, RopeStyle::Neox),
        ),
        (
            "interleaved linear ×4",
            RopeConfig {
                scaling: RopeScaling::Linear { factor: 4.0 },
                ..RopeConfig::new(16, 10000.0, RopeStyle::Interleaved)
            },
        ),
        (
            "neox llama3",
            RopeConfig {
                scaling: llama3,
                ..RopeConfig::new(16, 500000.0, RopeStyle::Neox)
            },
        ),
        (
            "neox yarn ×4 with its attention factor",
            RopeConfig {
                scaling: yarn,
                attention_factor: 1.0 + 0.1 * 4f64.ln(),
                ..RopeConfig::new(16, 10000.0, RopeStyle::Neox)
            },
        ),
        (
            "interleaved yarn partial 12 of 16",
            RopeConfig {
                scaling: yarn,
                attention_factor: 1.0 + 0.1 * 4f64.ln(),
                ..RopeConfig::new(12, 1e6, RopeStyle::Interleaved)
            },
        ),
    ];
    for (label, config) in configs {
        let x = inputs.normal(&[5, 3, 16])?;
        let positions = u32s(&[0, 1, 7, 300, 4095], &[5])?;
        cases.push(Case::new(
            "rope",
            label,
            Precision::Rotation,
            vec![x, positions],
            move |c, i| Ok(vec![c.rope(&i[0], &i[1], &config, None)?]),
        ));
    }
    let config = RopeConfig::new(16, 10000.0, RopeStyle::Neox);
    let x = inputs.normal(&[2, 4, 2, 16])?;
    let positions = u32s(&[3, 9, 10, 11], &[4])?;
    let factors = inputs.uniform(&[8], 1.0, 8.0)?;
    cases.push(
        Case::new(
            "rope",
            "neox batched with frequency factors",
            Precision::Rotation,
            vec![x, positions, factors],
            move |c, i| Ok(vec![c.rope(&i[0], &i[1], &config, Some(&i[2]))?]),
        )
        .keep(2),
    );
    // LongRoPE: per-pair factors and an attention factor, partial rotation.
    let config = RopeConfig {
        attention_factor: 1.19,
        ..RopeConfig::new(12, 10000.0, RopeStyle::Neox)
    };
    let x = inputs.normal(&[4, 2, 16])?;
    let positions = u32s(&[0, 63, 200, 1000], &[4])?;
    let factors = inputs.uniform(&[6], 1.0, 30.0)?;
    cases.push(
        Case::new(
            "rope",
            "neox partial longrope factors and attention factor",
            Precision::Rotation,
            vec![x, positions, factors],
            move |c, i| Ok(vec![c.rope(&i[0], &i[1], &config, Some(&i[2]))?]),
        )
        .keep(2),
    );
    let x = inputs.normal(&[4, 3, 16])?;
    let positions = u32s(&[5, 6, 7, 8], &[4])?;
    cases.push(Case::new(
        "rope",
        "inverse interleaved",
        Precision::Rotation,
        vec![x, positions],
        |c, i| {
            let config = RopeConfig::new(16, 10000.0, RopeStyle::Interleaved);
            Ok(vec![c.rope_inverse(&i[0], &i[1], &config, None)?])
        },
    ));
    // A strided input: the q part of a fused qkv row.
    let qkv = inputs.normal(&[3, 2, 48])?;
    let positions = u32s(&[0, 1, 2], &[3])?;
    cases.push(Case::new(
        "rope",
        "neox on a narrowed view",
        Precision::Rotation,
        vec![qkv, positions],
        |c, i| {
            let config = RopeConfig::new(16, 10000.0, RopeStyle::Neox);
            Ok(vec![c.rope(
                &i[0].narrow(2, 16, 16)?,
                &i[1],
                &config,
                None,
            )?])
        },
    ));

    let ids = [0u32, 5, 5, 32, 1, 17, 31];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let table = inputs.normal_as(&[33, 48], dtype)?;
        let precision = if dtype == DType::F32 {
            Precision::Exact
        } else {
            Precision::Dequantized(dtype)
        };
        cases.push(Case::new(
            "embedding",
            format!("{dtype} table [33, 48]"),
            precision,
            vec![table, u32s(&ids, &[7])?],
            |c, i| Ok(vec![c.embedding(&i[0], &i[1])?]),
        ));
    }
    for dtype in WEIGHT_BLOCK_FORMATS {
        let table = inputs.normal_as(&[33, 256], dtype)?;
        cases.push(Case::new(
            "embedding",
            format!("{dtype} table [33, 256]"),
            Precision::Dequantized(dtype),
            vec![table, u32s(&ids, &[7])?],
            |c, i| Ok(vec![c.embedding(&i[0], &i[1])?]),
        ));
    }
    let table = inputs.normal(&[33, 16])?;
    cases.push(Case::new(
        "embedding",
        "f32 ids [2, 3]",
        Precision::Exact,
        vec![table, u32s(&[1, 2, 3, 30, 31, 32], &[2, 3])?],
        |c, i| Ok(vec![c.embedding(&i[0], &i[1])?]),
    ));
    Ok(())
}
