//! Cross-entropy and its logits gradient against the reference: vocabulary sizes, an
//! ignored index, a non-unit upstream gradient, and out-of-range targets rejected.

mod common;

use common::{check, cpus, randn};
use tempra_tensor::{DType, ExecContext, Result, Tensor};

/// f32 log-sum-exp against the f64 reference.
const TOL: f64 = 4e-12;

fn targets(ctx: &ExecContext, rows: usize, v: usize, ignore: Option<u32>) -> Result<Tensor> {
    let ids: Vec<u32> = (0..rows)
        .map(|r| match ignore {
            Some(i) if r % 3 == 1 => i,
            _ => ((r * 7919 + 13) % v) as u32,
        })
        .collect();
    ctx.from_slice(&ids, &[rows])
}

#[test]
fn loss_and_gradient_match_the_reference() {
    for &(rows, v) in &[(1, 1), (5, 3), (17, 257), (33, 1024)] {
        for ignore in [None, Some(v as u32 + 5)] {
            let what = format!("rows {rows} V {v} ignore {ignore:?}");
            check(&format!("cross_entropy {what}"), TOL, |ctx| {
                let logits = ctx.mul_scalar(&randn(ctx, &[rows, v], DType::F32, 1), 3.0)?;
                ctx.cross_entropy(&logits, &targets(ctx, rows, v, ignore)?, ignore)
            });
            check(&format!("cross_entropy_backward {what}"), TOL, |ctx| {
                let logits = ctx.mul_scalar(&randn(ctx, &[rows, v], DType::F32, 1), 3.0)?;
                let grad = randn(ctx, &[rows], DType::F32, 2);
                let t = targets(ctx, rows, v, ignore)?;
                ctx.cross_entropy_backward(&logits, &t, ignore, &grad)
            });
        }
    }
}

#[test]
fn out_of_range_targets_are_errors() {
    for cpu in cpus() {
        let ctx = &cpu.ctx;
        let logits = randn(ctx, &[2, 4], DType::F32, 1);
        let t = ctx.from_slice(&[1u32, 4], &[2]).unwrap();
        let err = ctx.cross_entropy(&logits, &t, None).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
        let grad = randn(ctx, &[2], DType::F32, 2);
        let err = ctx
            .cross_entropy_backward(&logits, &t, None, &grad)
            .unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }
}
