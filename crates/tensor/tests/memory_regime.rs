//! Inference on constants: transients return to the pool as soon as their last view drops,
//! so a long chain holds only a handful of leases at once.

use tempra_tensor::{DType, ExecContext, Tensor};

/// One step of the chain.
type Step<'a> = &'a dyn Fn(&Tensor) -> tempra_tensor::Result<Tensor>;

#[test]
fn sixteen_op_chain_holds_at_most_three_leases() -> anyhow::Result<()> {
    let ctx = ExecContext::reference();
    let x = ctx.randn(&[4, 32], DType::F32, 0.0, 1.0, 3)?;
    let w = ctx.randn(&[32, 32], DType::F32, 0.0, 0.2, 4)?;
    let g = ctx.full(&[32], DType::F32, 1.0)?;
    let base = ctx.pool_stats().outstanding; // x, w, g
    let mut peak = 0;
    let mut track = |t: &Tensor| {
        let live = ctx.pool_stats().outstanding - base;
        peak = peak.max(live);
        t.elem_count()
    };
    let mut h = ctx.rms_norm(&x, &g, 1e-5)?; // 1
    track(&h);
    let steps: [Step<'_>; 15] = [
        &|t| ctx.linear(t, &w, None),
        &|t| ctx.silu(t),
        &|t| ctx.mul_scalar(t, 0.5),
        &|t| ctx.add(t, &x),
        &|t| ctx.tanh(t),
        &|t| ctx.softmax(t),
        &|t| ctx.log(t),
        &|t| ctx.neg(t),
        &|t| ctx.sqrt(t),
        &|t| ctx.matmul(t, &w),
        &|t| ctx.gelu(t),
        &|t| ctx.rms_norm(t, &g, 1e-5),
        &|t| ctx.sigmoid(t),
        &|t| ctx.exp(t),
        &|t| ctx.relu(t),
    ];
    for step in steps {
        let next = step(&h)?; // h and next live: 2 leases, plus any op transient
        track(&next);
        h = next; // the old h drops here
        track(&h);
    }
    assert!(peak <= 3, "peak outstanding transients {peak}");
    assert_eq!(ctx.pool_stats().outstanding - base, 1);
    drop(h);
    assert_eq!(ctx.pool_stats().outstanding, base);
    Ok(())
}
