//! softmax and log_softmax along the last dim, against the reference.

mod common;

use common::{SIZES, check, randn};
use tempra_tensor::DType;

/// exp is within ~1e-7 relative; the sum is accumulated in f32.
const TOL: f64 = 4e-12;

#[test]
fn softmax_rows_of_odd_sizes_and_views() {
    for log in [false, true] {
        let op = |ctx: &tempra_tensor::ExecContext, x: &tempra_tensor::Tensor| {
            if log {
                ctx.log_softmax(x)
            } else {
                ctx.softmax(x)
            }
        };
        let name = if log { "log_softmax" } else { "softmax" };
        for &n in SIZES {
            check(&format!("{name} [5, {n}]"), TOL, |ctx| {
                op(
                    ctx,
                    &ctx.mul_scalar(&randn(ctx, &[5, n], DType::F32, n as u64), 4.0)?,
                )
            });
        }
        check(&format!("{name} transposed"), TOL, |ctx| {
            op(ctx, &randn(ctx, &[33, 17], DType::F32, 1).t()?)
        });
        check(&format!("{name} narrowed"), TOL, |ctx| {
            op(
                ctx,
                &randn(ctx, &[3, 9, 40], DType::F32, 2).narrow(2, 4, 33)?,
            )
        });
        check(&format!("{name} broadcast"), TOL, |ctx| {
            op(
                ctx,
                &randn(ctx, &[1, 257], DType::F32, 3).broadcast_to(&[4, 257])?,
            )
        });
        check(&format!("{name} vocab rows"), TOL, |ctx| {
            op(
                ctx,
                &ctx.mul_scalar(&randn(ctx, &[3, 32_000], DType::F32, 4), 8.0)?,
            )
        });
        check(&format!("{name} many rows"), TOL, |ctx| {
            op(ctx, &randn(ctx, &[600, 100], DType::F32, 5))
        });
        check(&format!("{name} with -inf"), TOL, |ctx| {
            let x = randn(ctx, &[4, 40], DType::F32, 6);
            let mask = ctx
                .full(&[4, 40], DType::F32, f64::NEG_INFINITY)?
                .narrow(1, 0, 13)?;
            let x = ctx.concat(&[&mask, &x.narrow(1, 13, 27)?], 1)?;
            op(ctx, &x)
        });
    }
}
