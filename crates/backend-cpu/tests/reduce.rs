//! reduce (sum, mean, max, min) and argmax along every dim, against the reference.

mod common;

use common::{SIZES, check, cpus, randn, reference};
use tempra_tensor::{DType, ReduceOp};

/// Sums are accumulated in f32 (the reference in f64): a few ulps of the largest partial
/// sum, relative to the largest result.
const TOL_SUM: f64 = 4e-12;

const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min];

#[test]
fn reductions_along_the_last_dim() {
    for op in OPS {
        for &n in SIZES {
            check(&format!("{} [3, {n}] dim 1", op.name()), TOL_SUM, |ctx| {
                ctx.reduce(op, &randn(ctx, &[3, n], DType::F32, n as u64), 1, false)
            });
        }
        check(&format!("{} long row", op.name()), TOL_SUM, |ctx| {
            ctx.reduce(op, &randn(ctx, &[2, 40_000], DType::F32, 1), 1, true)
        });
        check(&format!("{} strided row", op.name()), TOL_SUM, |ctx| {
            ctx.reduce(op, &randn(ctx, &[300, 7], DType::F32, 2).t()?, 1, false)
        });
    }
}

#[test]
fn reductions_along_inner_dims() {
    for op in OPS {
        for dim in 0..3 {
            check(
                &format!("{} [5, 17, 33] dim {dim}", op.name()),
                TOL_SUM,
                |ctx| ctx.reduce(op, &randn(ctx, &[5, 17, 33], DType::F32, 3), dim, true),
            );
            check(
                &format!("{} permuted dim {dim}", op.name()),
                TOL_SUM,
                |ctx| {
                    ctx.reduce(
                        op,
                        &randn(ctx, &[17, 5, 33], DType::F32, 4).permute(&[1, 2, 0])?,
                        dim,
                        false,
                    )
                },
            );
        }
        check(&format!("{} broadcast dim 0", op.name()), TOL_SUM, |ctx| {
            ctx.reduce(
                op,
                &randn(ctx, &[1, 257], DType::F32, 5).broadcast_to(&[9, 257])?,
                0,
                false,
            )
        });
        check(&format!("{} big dim 0", op.name()), TOL_SUM, |ctx| {
            ctx.reduce(op, &randn(ctx, &[300, 2000], DType::F32, 6), 0, false)
        });
    }
}

#[test]
fn max_min_propagate_nan_and_argmax_picks_the_first() {
    let rows = [
        vec![1.0f32, 3.0, 3.0, 2.0, -1.0, 3.0, 0.0, 0.0, 3.0, 1.0],
        vec![f32::NEG_INFINITY; 10],
        vec![1.0, f32::NAN, 5.0, f32::NAN, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        vec![
            f32::INFINITY,
            1.0,
            f32::INFINITY,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            f32::NEG_INFINITY,
        ],
        (0..10)
            .map(|i| if i == 9 { 7.0 } else { -(i as f32) })
            .collect(),
    ];
    let flat: Vec<f32> = rows.concat();
    for op in [ReduceOp::Max, ReduceOp::Min] {
        check(&format!("{} specials", op.name()), 0.0, |ctx| {
            ctx.reduce(op, &ctx.from_slice(&flat, &[5, 10])?, 1, false)
        });
    }
    check("argmax specials", 0.0, |ctx| {
        ctx.argmax(&ctx.from_slice(&flat, &[5, 10])?, 1, false)
    });
    // Long rows: ties across vector lanes and tails.
    let mut long = vec![0.5f32; 1000];
    long[517] = 2.0;
    long[999] = 2.0;
    long[3] = 1.0;
    check("argmax long ties", 0.0, |ctx| {
        ctx.argmax(&ctx.from_slice(&long, &[1000])?, 0, false)
    });
}

#[test]
fn argmax_along_every_dim() {
    for &n in SIZES {
        check(&format!("argmax [4, {n}]"), 0.0, |ctx| {
            ctx.argmax(&randn(ctx, &[4, n], DType::F32, n as u64), 1, false)
        });
    }
    for dim in 0..3 {
        check(&format!("argmax dim {dim}"), 0.0, |ctx| {
            ctx.argmax(&randn(ctx, &[5, 17, 33], DType::F32, 9), dim, true)
        });
        check(&format!("argmax transposed dim {dim}"), 0.0, |ctx| {
            ctx.argmax(
                &randn(ctx, &[33, 17, 5], DType::F32, 9).permute(&[2, 1, 0])?,
                dim,
                true,
            )
        });
    }
    // Vocabulary-sized rows, as a sampler would use.
    check("argmax vocab", 0.0, |ctx| {
        ctx.argmax(&randn(ctx, &[2, 32_000], DType::F32, 11), 1, false)
    });
    let _ = (cpus, reference);
}
