//! unary, binary (broadcasting), binary_inplace and binary_scalar against the reference.

mod common;

use common::{SIZES, check, cpus, randn, reference};
use tempra_tensor::{BinaryOp, DType, ExecContext, Result, Tensor, UnaryOp};

/// Normalized-error budget of the elementwise ops in f32 (the approximations are within
/// ~2.5e-7 relative; erf-GELU within ~1e-6).
const TOL: f64 = 1e-12;
const TOL_ERF: f64 = 1e-11;

/// Inputs valid for `op` (positive for log/sqrt/rsqrt), spread wide enough to reach the
/// approximations' range reductions.
fn input(ctx: &ExecContext, op: UnaryOp, dims: &[usize], seed: u64) -> Result<Tensor> {
    let x = ctx.randn(dims, DType::F32, 0.0, 4.0, seed)?;
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => ctx.add_scalar(&ctx.abs(&x)?, 1e-3),
        UnaryOp::Exp => ctx.mul_scalar(&x, 5.0),
        _ => Ok(x),
    }
}

#[test]
fn unary_ops_on_odd_sizes_and_views() {
    for op in UnaryOp::ALL {
        let tol = if op == UnaryOp::GeluErf { TOL_ERF } else { TOL };
        for &n in SIZES {
            check(&format!("{} [{n}]", op.name()), tol, |ctx| {
                ctx.unary(op, &input(ctx, op, &[n], n as u64)?)
            });
        }
        check(&format!("{} transposed", op.name()), tol, |ctx| {
            ctx.unary(op, &input(ctx, op, &[17, 33], 7)?.t()?)
        });
        check(&format!("{} broadcast", op.name()), tol, |ctx| {
            ctx.unary(op, &input(ctx, op, &[1, 33], 8)?.broadcast_to(&[5, 33])?)
        });
        check(&format!("{} narrowed", op.name()), tol, |ctx| {
            ctx.unary(op, &input(ctx, op, &[9, 40], 9)?.narrow(1, 3, 33)?)
        });
        check(&format!("{} large", op.name()), tol, |ctx| {
            ctx.unary(op, &input(ctx, op, &[70_001], 10)?)
        });
    }
}

#[test]
fn unary_special_values() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        100.0,
        -100.0,
        1e-30,
        -1e-30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    for op in UnaryOp::ALL {
        let want = reference()
            .unary(
                op,
                &reference()
                    .from_slice(&specials, &[specials.len()])
                    .unwrap(),
            )
            .unwrap();
        let want = want.to_vec_f32().unwrap();
        for cpu in cpus() {
            let x = cpu.ctx.from_slice(&specials, &[specials.len()]).unwrap();
            let got = cpu.ctx.unary(op, &x).unwrap().to_vec_f32().unwrap();
            for ((g, w), x) in got.iter().zip(&want).zip(specials) {
                let ok = (g.is_nan() && w.is_nan())
                    || g == w
                    || (g - w).abs() <= 2e-6 * w.abs().max(1e-30)
                    || (w.abs() < 1e-37 && g.abs() < 1e-37);
                assert!(
                    ok,
                    "{}({x}) [{}]: got {g:e}, want {w:e}",
                    op.name(),
                    cpu.name
                );
            }
        }
    }
}

/// Shapes `(a, b)` covering every broadcast fast path and the strided path.
fn binary_cases(ctx: &ExecContext, case: usize) -> Result<(Tensor, Tensor)> {
    let r = |dims: &[usize], seed| ctx.randn(dims, DType::F32, 0.5, 2.0, seed);
    Ok(match case {
        0 => (r(&[17, 33], 1)?, r(&[17, 33], 2)?),
        1 => (r(&[17, 33], 1)?, r(&[33], 2)?),
        2 => (r(&[17, 33], 1)?, r(&[17, 1], 2)?),
        3 => (r(&[1, 33], 1)?, r(&[17, 33], 2)?),
        4 => (r(&[17, 1], 1)?, r(&[1, 33], 2)?),
        5 => (r(&[33, 17], 1)?.t()?, r(&[17, 33], 2)?),
        6 => (r(&[17, 33], 1)?, r(&[33, 17], 2)?.t()?),
        7 => (r(&[3, 4, 257], 1)?, r(&[4, 1], 2)?),
        8 => (r(&[1], 1)?, r(&[255], 2)?),
        9 => (r(&[300, 301], 1)?, r(&[301], 2)?),
        _ => (
            r(&[5, 9, 40], 1)?.narrow(2, 1, 33)?,
            r(&[9, 5], 2)?.t()?.unsqueeze(2)?,
        ),
    })
}

#[test]
fn binary_ops_with_broadcasting() {
    for op in BinaryOp::ALL {
        for case in 0..11 {
            check(&format!("{} case {case}", op.name()), TOL, |ctx| {
                let (a, b) = binary_cases(ctx, case)?;
                ctx.binary(op, &a, &b)
            });
        }
    }
}

#[test]
fn binary_inplace_and_scalar() {
    for op in BinaryOp::ALL {
        for case in [0, 1, 2, 7, 9] {
            check(&format!("{} inplace case {case}", op.name()), TOL, |ctx| {
                let (a, b) = binary_cases(ctx, case)?;
                let a = ctx.contiguous(&a)?;
                let a = ctx.mul_scalar(&a, 1.0)?; // a fresh, uniquely held buffer
                ctx.binary_inplace(op, a, &b)
            });
        }
        for &n in SIZES {
            check(&format!("{} scalar [{n}]", op.name()), TOL, |ctx| {
                ctx.binary_scalar(op, &randn(ctx, &[n], DType::F32, 3), 1.7)
            });
        }
        check(&format!("{} scalar transposed", op.name()), TOL, |ctx| {
            ctx.binary_scalar(op, &randn(ctx, &[17, 33], DType::F32, 3).t()?, -0.3)
        });
    }
}

#[test]
fn max_min_propagate_nan() {
    let a = [
        1.0f32,
        f32::NAN,
        3.0,
        -0.0,
        f32::INFINITY,
        2.0,
        f32::NAN,
        5.0,
        1.0,
    ];
    let b = [
        f32::NAN,
        2.0,
        1.0,
        0.0,
        1.0,
        f32::NEG_INFINITY,
        f32::NAN,
        6.0,
        1.0,
    ];
    for op in [BinaryOp::Maximum, BinaryOp::Minimum] {
        let want = {
            let ctx = reference();
            ctx.binary(
                op,
                &ctx.from_slice(&a, &[9]).unwrap(),
                &ctx.from_slice(&b, &[9]).unwrap(),
            )
            .unwrap()
        };
        for cpu in cpus() {
            let got = cpu
                .ctx
                .binary(
                    op,
                    &cpu.ctx.from_slice(&a, &[9]).unwrap(),
                    &cpu.ctx.from_slice(&b, &[9]).unwrap(),
                )
                .unwrap();
            for (g, w) in got
                .to_vec_f32()
                .unwrap()
                .iter()
                .zip(want.to_vec_f32().unwrap())
            {
                assert!(
                    (g.is_nan() && w.is_nan()) || *g == w,
                    "{} [{}]: {g} vs {w}",
                    op.name(),
                    cpu.name
                );
            }
        }
    }
}

#[test]
fn f64_is_delegated_and_exact() {
    check("exp f64", 0.0, |ctx| {
        ctx.exp(&ctx.randn(&[33], DType::F64, 0.0, 1.0, 4)?)
    });
    check("add f64", 0.0, |ctx| {
        ctx.add(
            &ctx.randn(&[3, 33], DType::F64, 0.0, 1.0, 4)?,
            &ctx.randn(&[33], DType::F64, 0.0, 1.0, 5)?,
        )
    });
}
