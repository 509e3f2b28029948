//! rms_norm and layer_norm against the reference, with F32/F16/BF16/F64 weights.

mod common;

use common::{SIZES, check, randn};
use tempra_tensor::{DType, ExecContext, Result, Tensor};

/// Sums of squares in f32 (chunks joined in f64), the scale in f64.
const TOL: f64 = 1e-12;

fn input(ctx: &ExecContext, rows: usize, d: usize, seed: u64) -> Result<Tensor> {
    ctx.add_scalar(
        &ctx.mul_scalar(&randn(ctx, &[rows, d], DType::F32, seed), 3.0)?,
        0.5,
    )
}

#[test]
fn rms_norm_rows() {
    for wd in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for &d in SIZES {
            check(&format!("rms_norm {wd} [7, {d}]"), TOL, |ctx| {
                ctx.rms_norm(
                    &input(ctx, 7, d, d as u64)?,
                    &randn(ctx, &[d], wd, 99),
                    1e-5,
                )
            });
        }
        check(&format!("rms_norm {wd} transposed"), TOL, |ctx| {
            ctx.rms_norm(
                &input(ctx, 33, 17, 1)?.t()?,
                &randn(ctx, &[33], wd, 2),
                1e-6,
            )
        });
    }
    check("rms_norm strided weight", TOL, |ctx| {
        ctx.rms_norm(
            &input(ctx, 4, 33, 3)?,
            &randn(ctx, &[33, 2], DType::F32, 4)
                .narrow(1, 1, 1)?
                .squeeze(1)?,
            1e-6,
        )
    });
    check("rms_norm 3-d, many rows", TOL, |ctx| {
        ctx.rms_norm(
            &randn(ctx, &[2, 300, 2048], DType::F32, 5),
            &randn(ctx, &[2048], DType::F32, 6),
            1e-5,
        )
    });
    check("rms_norm zero rows", TOL, |ctx| {
        ctx.rms_norm(
            &ctx.zeros(&[3, 17], DType::F32)?,
            &randn(ctx, &[17], DType::F32, 6),
            1e-5,
        )
    });
}

#[test]
fn layer_norm_rows() {
    for (wd, with_bias) in [
        (DType::F32, true),
        (DType::F32, false),
        (DType::F16, true),
        (DType::BF16, true),
        (DType::F64, true),
    ] {
        for &d in SIZES {
            check(
                &format!("layer_norm {wd} bias {with_bias} [5, {d}]"),
                TOL,
                |ctx| {
                    let b = randn(ctx, &[d], wd, 7);
                    ctx.layer_norm(
                        &input(ctx, 5, d, d as u64)?,
                        &randn(ctx, &[d], wd, 8),
                        with_bias.then_some(&b),
                        1e-5,
                    )
                },
            );
        }
    }
    check("layer_norm permuted", TOL, |ctx| {
        let x = randn(ctx, &[33, 3, 9], DType::F32, 9).permute(&[1, 2, 0])?;
        ctx.layer_norm(
            &x,
            &randn(ctx, &[33], DType::F32, 10),
            Some(&randn(ctx, &[33], DType::F32, 11)),
            1e-5,
        )
    });
    check("layer_norm offset rows", TOL, |ctx| {
        // A large mean relative to the spread: the two-pass variance keeps it accurate.
        let x = ctx.add_scalar(&randn(ctx, &[6, 257], DType::F32, 12), 100.0)?;
        ctx.layer_norm(&x, &randn(ctx, &[257], DType::F32, 13), None, 1e-5)
    });
}
