//! Copies: contiguous copies of views, casts between plain dtypes, block copies,
//! dequantization, writes into regions (KV-cache writes), concat and fill.

use tempra_tensor::DType;

use crate::common::{assert_close, bytes_pair, randn_pair, tol};
use crate::setup;

const PLAIN: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U32,
    DType::U8,
];

#[test]
fn contiguous_and_casts_between_plain_dtypes() -> anyhow::Result<()> {
    let (_, g, r) = setup!("contiguous_and_casts_between_plain_dtypes");
    // Values exact in every plain dtype: small integers, some negative.
    let values: Vec<f32> = (0..7 * 9).map(|i| ((i * 37) % 23) as f32 - 6.0).collect();
    let (xg, xr) = (
        g.from_slice(&values, &[7, 9])?,
        r.from_slice(&values, &[7, 9])?,
    );
    for from in PLAIN {
        let (ag, ar) = (g.cast(&xg, from)?, r.cast(&xr, from)?);
        for to in PLAIN {
            let what = format!("{from} -> {to}");
            assert_close(&g.cast(&ag, to)?, &r.cast(&ar, to)?, 0.0, &what)?;
            assert_close(
                &g.cast(&ag.t()?, to)?,
                &r.cast(&ar.t()?, to)?,
                0.0,
                &format!("{what} transposed"),
            )?;
        }
        let what = format!("contiguous {from}");
        assert_close(
            &g.contiguous(&ag.t()?)?,
            &r.contiguous(&ar.t()?)?,
            0.0,
            &what,
        )?;
    }
    // Rounding to f16/bf16 (round to nearest even) and saturating float→int casts.
    let (fg, fr) = randn_pair(&g, &r, &[3, 50], DType::F32, 140)?;
    let (fg, fr) = (g.mul_scalar(&fg, 300.0)?, r.mul_scalar(&fr, 300.0)?);
    for to in [DType::F16, DType::BF16, DType::I32, DType::U32, DType::U8] {
        assert_close(
            &g.cast(&fg, to)?,
            &r.cast(&fr, to)?,
            0.0,
            &format!("f32 -> {to} rounding"),
        )?;
    }
    let edges = [
        f32::NAN,
        f32::INFINITY,
        -1e10,
        1e10,
        65520.0,
        1e-8,
        -2.5,
        255.5,
        300.0,
    ];
    for to in [DType::F16, DType::BF16, DType::I32, DType::U32, DType::U8] {
        let a = g.cast(&g.from_slice(&edges, &[edges.len()])?, to)?;
        let b = r.cast(&r.from_slice(&edges, &[edges.len()])?, to)?;
        assert_close(&a, &b, 0.0, &format!("edges -> {to}"))?;
    }
    anyhow::ensure!(!g.handoffs().contains_key("copy"));
    Ok(())
}

#[test]
fn block_copies_and_dequantization() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("block_copies_and_dequantization");
    for dtype in [DType::Q8_0, DType::Q4_0, DType::Q4K, DType::Q5K, DType::Q6K] {
        let k = dtype.block_len() * 2;
        let host = r.quantize(&r.randn(&[5, k], DType::F32, 0.0, 1.0, 150)?, dtype)?;
        let (qg, qr) = bytes_pair(&g, &r, &host)?;
        // Dense concat (buffer copies) and a strided block copy (rows reversed order by
        // a narrow + concat along dim 1: block columns).
        let cg = g.concat(&[&qg, &qg.narrow(0, 1, 2)?], 0)?;
        let cr = r.concat(&[&qr, &qr.narrow(0, 1, 2)?], 0)?;
        assert_close(&cg, &cr, 0.0, &format!("concat {dtype} rows"))?;
        let cg = g.concat(&[&qg, &qg], 1)?;
        let cr = r.concat(&[&qr, &qr], 1)?;
        assert_close(&cg, &cr, 0.0, &format!("concat {dtype} columns"))?;
        for to in [DType::F32, DType::F16, DType::BF16] {
            assert_close(
                &g.cast(&qg, to)?,
                &r.cast(&qr, to)?,
                tol::EXACT_F32,
                &format!("{dtype} -> {to}"),
            )?;
            // Rows 1..4, second block of each: a strided view of whole blocks.
            let bl = dtype.block_len();
            let (vg, vr) = (
                qg.narrow(0, 1, 3)?.narrow(1, bl, bl)?,
                qr.narrow(0, 1, 3)?.narrow(1, bl, bl)?,
            );
            assert_close(
                &g.cast(&vg, to)?,
                &r.cast(&vr, to)?,
                tol::EXACT_F32,
                &format!("{dtype} -> {to} view"),
            )?;
        }
    }
    Ok(())
}

#[test]
fn write_slice_into_an_f16_cache() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("write_slice_into_an_f16_cache");
    // A [T, H, D] f16 cache; rows written one step at a time, and a strided region
    // (one head's slice along D) written from f32.
    let mut cg = g.zeros(&[6, 3, 5], DType::F16)?;
    let mut cr = r.zeros(&[6, 3, 5], DType::F16)?;
    for (step, seed) in [(0, 160), (1, 161), (4, 162)] {
        let (ng, nr) = randn_pair(&g, &r, &[1, 3, 5], DType::F32, seed)?;
        g.write_slice(&mut cg, 0, step, &ng)?;
        r.write_slice(&mut cr, 0, step, &nr)?;
    }
    let (hg, hr) = randn_pair(&g, &r, &[6, 3, 1], DType::F32, 163)?;
    g.write_slice(&mut cg, 2, 3, &hg)?;
    r.write_slice(&mut cr, 2, 3, &hr)?;
    assert_close(&cg, &cr, 0.0, "f16 cache")?;
    let (mut u8g, mut u8r) = (g.zeros(&[4, 7], DType::U8)?, r.zeros(&[4, 7], DType::U8)?);
    let column: Vec<u8> = (0..4).map(|i| 10 + i).collect();
    g.write_slice(&mut u8g, 1, 3, &g.from_slice(&column, &[4, 1])?)?;
    r.write_slice(&mut u8r, 1, 3, &r.from_slice(&column, &[4, 1])?)?;
    assert_close(&u8g, &u8r, 0.0, "u8 column")?;
    Ok(())
}

#[test]
fn fill_every_plain_dtype() -> anyhow::Result<()> {
    let (_, g, r) = setup!("fill_every_plain_dtype");
    for dtype in [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::U8,
    ] {
        for value in [0.0, 2.5, -3.0] {
            let what = format!("full {dtype} {value}");
            assert_close(
                &g.full(&[3, 11], dtype, value)?,
                &r.full(&[3, 11], dtype, value)?,
                0.0,
                &what,
            )?;
        }
    }
    let a = g.arange(0.0, 10.0, 1.5, DType::F32)?;
    assert_close(&a, &r.arange(0.0, 10.0, 1.5, DType::F32)?, 0.0, "arange")?;
    anyhow::ensure!(!g.handoffs().contains_key("fill"));
    Ok(())
}
