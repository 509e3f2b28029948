//! Reductions along every dim, argmax (ties, NaN), softmax and log-softmax.

use tempra_tensor::{DType, ReduceOp};

use crate::common::{assert_close, rand_pair, randn_pair, tol};
use crate::setup;

#[test]
fn reductions_along_every_dim_and_permuted() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("reductions_along_every_dim_and_permuted");
    let (xg, xr) = randn_pair(&g, &r, &[3, 5, 67], DType::F32, 11)?;
    let (pg, pr) = (xg.permute(&[2, 0, 1])?, xr.permute(&[2, 0, 1])?);
    for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
        for dim in 0..3 {
            for keep in [false, true] {
                let what = format!("{} dim {dim} keep {keep}", op.name());
                assert_close(
                    &g.reduce(op, &xg, dim, keep)?,
                    &r.reduce(op, &xr, dim, keep)?,
                    tol::SUM_F32,
                    &what,
                )?;
                assert_close(
                    &g.reduce(op, &pg, dim, keep)?,
                    &r.reduce(op, &pr, dim, keep)?,
                    tol::SUM_F32,
                    &format!("{what} permuted"),
                )?;
            }
        }
    }
    // A long lane (many elements per invocation) and sum_all.
    let (lg, lr) = randn_pair(&g, &r, &[2, 1000], DType::F32, 12)?;
    assert_close(
        &g.sum(&lg, 1, false)?,
        &r.sum(&lr, 1, false)?,
        tol::SUM_F32,
        "long sum",
    )?;
    assert_close(&g.sum_all(&xg)?, &r.sum_all(&xr)?, tol::SUM_F32, "sum_all")?;
    Ok(())
}

#[test]
fn argmax_first_max_and_nan() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("argmax_first_max_and_nan");
    let (xg, xr) = rand_pair(&g, &r, &[4, 131], 0.0, 1.0, 13)?;
    for dim in 0..2 {
        let (a, b) = (g.argmax(&xg, dim, false)?, r.argmax(&xr, dim, false)?);
        anyhow::ensure!(a.to_vec::<u32>()? == b.to_vec::<u32>()?, "argmax dim {dim}");
        let (a, b) = (
            g.argmax(&xg.t()?, dim, true)?,
            r.argmax(&xr.t()?, dim, true)?,
        );
        anyhow::ensure!(
            a.to_vec::<u32>()? == b.to_vec::<u32>()?,
            "argmax transposed dim {dim}"
        );
    }
    let ties = [1.0f32, 3.0, 3.0, 2.0, 3.0, 0.0, 1.0, 3.0, 3.0, 3.0];
    let with_nan = [1.0f32, 2.0, f32::NAN, 5.0, f32::NAN];
    for values in [&ties[..], &with_nan[..]] {
        let n = values.len();
        let a = g
            .argmax(&g.from_slice(values, &[n])?, 0, false)?
            .to_vec::<u32>()?;
        let b = r
            .argmax(&r.from_slice(values, &[n])?, 0, false)?
            .to_vec::<u32>()?;
        anyhow::ensure!(a == b, "argmax {values:?}: gpu {a:?} vs reference {b:?}");
    }
    // Ties spread over many invocations: every element equal.
    let flat = g.full(&[300], DType::F32, 2.5)?;
    anyhow::ensure!(g.argmax(&flat, 0, false)?.to_vec::<u32>()? == [0]);
    Ok(())
}

#[test]
fn softmax_and_log_softmax() -> anyhow::Result<()> {
    let (_gpu, g, r) = setup!("softmax_and_log_softmax");
    let (xg, xr) = randn_pair(&g, &r, &[4, 129], DType::F32, 14)?;
    let (xg, xr) = (g.mul_scalar(&xg, 4.0)?, r.mul_scalar(&xr, 4.0)?);
    assert_close(&g.softmax(&xg)?, &r.softmax(&xr)?, tol::SUM_F32, "softmax")?;
    assert_close(
        &g.log_softmax(&xg)?,
        &r.log_softmax(&xr)?,
        tol::SUM_F32,
        "log_softmax",
    )?;
    let (ng, nr) = (xg.narrow(1, 3, 70)?, xr.narrow(1, 3, 70)?);
    assert_close(
        &g.softmax(&ng)?,
        &r.softmax(&nr)?,
        tol::SUM_F32,
        "softmax narrowed",
    )?;
    assert_close(
        &g.softmax(&xg.t()?)?,
        &r.softmax(&xr.t()?)?,
        tol::SUM_F32,
        "softmax transposed",
    )?;
    // Masked scores (-inf) give exact zeros.
    let masked = [0.5f32, f32::NEG_INFINITY, 1.5, f32::NEG_INFINITY];
    let a = g.softmax(&g.from_slice(&masked, &[4])?)?;
    let b = r.softmax(&r.from_slice(&masked, &[4])?)?;
    assert_close(&a, &b, tol::SUM_F32, "softmax masked")?;
    Ok(())
}
