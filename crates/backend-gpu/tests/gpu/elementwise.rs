//! Unary, binary (broadcasting, strided views), scalar and in-place ops.

use tempra_tensor::{Backend, BinaryOp, UnaryOp};

use crate::common::{assert_close, rand_pair, randn_pair, tol};
use crate::setup;

/// Inputs inside each op's domain.
fn range(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Recip => (0.1, 4.0),
        UnaryOp::Exp => (-4.0, 4.0),
        _ => (-5.0, 5.0),
    }
}

#[test]
fn unary_ops_on_odd_and_transposed() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("unary_ops_on_odd_and_transposed");
    for (i, op) in UnaryOp::ALL.into_iter().enumerate() {
        let (lo, hi) = range(op);
        let (xg, xr) = rand_pair(&g, &r, &[7, 33], lo, hi, 100 + i as u64)?;
        let t = if matches!(
            op,
            UnaryOp::Exp
                | UnaryOp::Tanh
                | UnaryOp::Sigmoid
                | UnaryOp::Silu
                | UnaryOp::GeluTanh
                | UnaryOp::GeluErf
                | UnaryOp::Log
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
        ) {
            tol::TRANSCENDENTAL
        } else {
            tol::EXACT_F32
        };
        assert_close(&g.unary(op, &xg)?, &r.unary(op, &xr)?, t, op.name())?;
        let (xgt, xrt) = (xg.t()?, xr.t()?);
        assert_close(
            &g.unary(op, &xgt)?,
            &r.unary(op, &xrt)?,
            t,
            &format!("{} transposed", op.name()),
        )?;
    }
    Ok(())
}

#[test]
fn unary_edge_values() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("unary_edge_values");
    let values = [
        0.0f32,
        -0.0,
        1e-30,
        -1.0,
        50.0,
        -50.0,
        100.0,
        f32::INFINITY,
        f32::NAN,
    ];
    for op in UnaryOp::ALL {
        let (xg, xr) = (
            g.from_slice(&values, &[values.len()])?,
            r.from_slice(&values, &[values.len()])?,
        );
        assert_close(
            &g.unary(op, &xg)?,
            &r.unary(op, &xr)?,
            1e-5,
            &format!("{} edges", op.name()),
        )?;
    }
    Ok(())
}

#[test]
fn binary_ops_broadcast_and_strided() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("binary_ops_broadcast_and_strided");
    let (ag, ar) = rand_pair(&g, &r, &[5, 1, 7], -3.0, 3.0, 1)?;
    let (bg, br) = rand_pair(&g, &r, &[3, 7], 0.5, 3.0, 2)?;
    let (cg, cr) = rand_pair(&g, &r, &[7, 3], -3.0, 3.0, 3)?;
    for op in BinaryOp::ALL {
        assert_close(
            &g.binary(op, &ag, &bg)?,
            &r.binary(op, &ar, &br)?,
            tol::EXACT_F32,
            op.name(),
        )?;
        // A transposed rhs and a narrowed lhs.
        let (an, arn) = (
            ag.narrow(0, 1, 3)?.squeeze(1)?,
            ar.narrow(0, 1, 3)?.squeeze(1)?,
        );
        assert_close(
            &g.binary(op, &an, &cg.t()?)?,
            &r.binary(op, &arn, &cr.t()?)?,
            tol::EXACT_F32,
            &format!("{} strided", op.name()),
        )?;
        assert_close(
            &g.binary_scalar(op, &ag, 1.75)?,
            &r.binary_scalar(op, &ar, 1.75)?,
            tol::EXACT_F32,
            &format!("{} scalar", op.name()),
        )?;
    }
    Ok(())
}

#[test]
fn nan_propagates_through_maximum_and_minimum() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("nan_propagates_through_maximum_and_minimum");
    let a = [1.0f32, f32::NAN, 3.0, -1.0];
    let b = [f32::NAN, 2.0, 1.0, -2.0];
    for op in [BinaryOp::Maximum, BinaryOp::Minimum] {
        let yg = g.binary(op, &g.from_slice(&a, &[4])?, &g.from_slice(&b, &[4])?)?;
        let yr = r.binary(op, &r.from_slice(&a, &[4])?, &r.from_slice(&b, &[4])?)?;
        assert_close(&yg, &yr, 0.0, op.name())?;
    }
    Ok(())
}

#[test]
fn binary_inplace_through_the_seam() -> anyhow::Result<()> {
    let (gpu, g, r) = setup!("binary_inplace_through_the_seam");
    let (ag, ar) = randn_pair(&g, &r, &[9, 13], tempra_tensor::DType::F32, 5)?;
    let (bg, br) = randn_pair(&g, &r, &[13], tempra_tensor::DType::F32, 6)?;
    for op in BinaryOp::ALL {
        let mut lhs = g.contiguous(&g.mul_scalar(&ag, 1.0)?)?; // a fresh, unique buffer
        gpu.binary_inplace(op, &mut lhs, &bg.broadcast_to(&[9, 13])?)?;
        let expected = r.binary(op, &ar, &br)?;
        assert_close(
            &lhs,
            &expected,
            tol::EXACT_F32,
            &format!("{} in place", op.name()),
        )?;
    }
    // A host lhs updated in place with a device rhs.
    let mut host = r.contiguous(&r.mul_scalar(&ar, 1.0)?)?;
    gpu.binary_inplace(BinaryOp::Sub, &mut host, &bg.broadcast_to(&[9, 13])?)?;
    assert_close(
        &host,
        &r.sub(&ar, &br)?,
        tol::EXACT_F32,
        "host lhs in place",
    )?;
    // The facade's add_inplace on device tensors takes the out-of-place path: same values.
    let sum = g.add_inplace(ag.clone(), &bg)?;
    assert_close(&sum, &r.add(&ar, &br)?, tol::EXACT_F32, "add_inplace")?;
    Ok(())
}
