//! Graph semantics (constants, accumulation, no_grad, detach, errors, deep graphs) and the
//! two memory regimes, observed through the pool's counters.

use tempra_autograd::{Autograd, AutogradError, Result, Var, is_grad_enabled, no_grad};
use tempra_tensor::{DType, ExecContext, Tensor};

fn setup() -> (ExecContext, Autograd) {
    let ctx = ExecContext::reference();
    (ctx.clone(), Autograd::new(ctx))
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec_f32().unwrap()
}

#[test]
fn constants_record_nothing() {
    let (ctx, ag) = setup();
    let x = Var::constant(ctx.from_slice(&[1.0f32, 2.0], &[2]).unwrap());
    let y = ag.exp(&ag.mul(&x, &x).unwrap()).unwrap();
    assert!(!y.requires_grad());
    assert_eq!((y.id(), y.op_name()), (None, None));
    assert!(matches!(
        ag.backward(&ag.sum_all(&y).unwrap()),
        Err(AutogradError::NoGraph)
    ));
}

#[test]
fn gradients_accumulate_over_every_use() {
    let (ctx, ag) = setup();
    let x = Var::variable(ctx.from_slice(&[1.0f32, -2.0], &[2]).unwrap());
    // y = Σ (2x + 3x + x·x) → dy/dx = 5 + 2x
    let a = ag.mul_scalar(&x, 2.0).unwrap();
    let b = ag.mul_scalar(&x, 3.0).unwrap();
    let c = ag.mul(&x, &x).unwrap();
    let y = ag
        .sum_all(&ag.add(&ag.add(&a, &b).unwrap(), &c).unwrap())
        .unwrap();
    let grads = ag.backward(&y).unwrap();
    assert_eq!(values(grads.get(&x).unwrap()), [7.0, 1.0]);
    assert_eq!(grads.len(), 1, "only leaves are kept");
    assert!(grads.get(&a).is_none());
}

#[test]
fn broadcast_inputs_get_reduced_gradients() {
    let (ctx, ag) = setup();
    let x = Var::constant(
        ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
            .unwrap(),
    );
    let b = Var::variable(ctx.from_slice(&[1.0f32, 1.0, 1.0], &[3]).unwrap());
    let s = Var::variable(ctx.from_slice(&[2.0f32], &[1, 1]).unwrap());
    let y = ag
        .sum_all(&ag.mul(&ag.add(&x, &b).unwrap(), &s).unwrap())
        .unwrap();
    let g = ag.backward(&y).unwrap();
    assert_eq!(values(g.get(&b).unwrap()), [4.0, 4.0, 4.0]);
    assert_eq!(g.get(&s).unwrap().dims(), [1, 1]);
    assert_eq!(values(g.get(&s).unwrap()), [27.0]);
}

#[test]
fn no_grad_and_detach_stop_recording() {
    let (ctx, ag) = setup();
    let x = Var::variable(ctx.from_slice(&[3.0f32], &[1]).unwrap());
    {
        let _outer = no_grad();
        {
            let _inner = no_grad();
            assert!(!ag.sqr(&x).unwrap().requires_grad());
        }
        assert!(!is_grad_enabled());
        assert!(!x.narrow(0, 0, 1).unwrap().requires_grad());
    }
    assert!(is_grad_enabled());
    // y = x · detach(x): dy/dx = detach(x) = 3
    let y = ag.sum_all(&ag.mul(&x, &x.detach()).unwrap()).unwrap();
    assert_eq!(values(ag.backward(&y).unwrap().get(&x).unwrap()), [3.0]);
}

#[test]
fn backward_errors_name_the_problem() {
    let (ctx, ag) = setup();
    let x = Var::variable(ctx.from_slice(&[1.0f32, 2.0], &[2]).unwrap());
    let y = ag.exp(&x).unwrap();
    assert!(matches!(
        ag.backward(&y),
        Err(AutogradError::NotScalar { .. })
    ));
    let wrong = ctx.zeros(&[3], DType::F32).unwrap();
    assert!(matches!(
        ag.backward_with(&y, wrong),
        Err(AutogradError::SeedShape { .. })
    ));
    let seed = ctx.from_slice(&[1.0f32, 0.5], &[2]).unwrap();
    let g = ag.backward_with(&y, seed.clone()).unwrap();
    let (got, e) = (values(g.get(&x).unwrap()), std::f64::consts::E);
    assert!(
        (got[0] as f64 - e).abs() < 1e-6 && (got[1] as f64 - 0.5 * e * e).abs() < 1e-6,
        "{got:?}"
    );
    let err = ag.backward_with(&y, seed).unwrap_err();
    assert!(
        matches!(err, AutogradError::GraphConsumed { op: "exp" }),
        "{err}"
    );
    // A facade error carries the facade's message.
    let err = ag.matmul(&x, &x).unwrap_err();
    assert!(err.to_string().contains("matmul"), "{err}");
}

#[test]
fn unreached_variables_have_no_gradient() {
    let (ctx, ag) = setup();
    let x = Var::variable(ctx.from_slice(&[1.0f32], &[1]).unwrap());
    let unused = Var::variable(ctx.from_slice(&[1.0f32], &[1]).unwrap());
    let g = ag.backward(&ag.sum_all(&x).unwrap()).unwrap();
    assert!(g.get(&unused).is_none());
    assert!(g.get(&x).is_some());
}

#[test]
fn deep_graphs_run_and_drop_without_recursion() {
    let (ctx, ag) = setup();
    let x = Var::variable(ctx.from_slice(&[0.0f32], &[1]).unwrap());
    let mut y = x.clone();
    for _ in 0..50_000 {
        y = ag.add_scalar(&y, 1.0).unwrap();
    }
    let g = ag.backward(&ag.sum_all(&y).unwrap()).unwrap();
    assert_eq!(values(g.get(&x).unwrap()), [1.0]);
    let mut z = x.clone();
    for _ in 0..200_000 {
        z = z.reshape(&[1]).unwrap();
    }
    drop(z); // unused graph: dropped iteratively
}

/// One step of the chain.
type Step<'a> = &'a dyn Fn(&Var) -> Result<Var>;

/// Sixteen elementwise ops, each with a saved input or output when recording.
fn chain(ag: &Autograd, x: &Var, mut each: impl FnMut()) -> Result<Var> {
    let steps: [Step<'_>; 16] = [
        &|v| ag.tanh(v),
        &|v| ag.mul_scalar(v, 1.5),
        &|v| ag.sigmoid(v),
        &|v| ag.sqr(v),
        &|v| ag.add_scalar(v, 0.5),
        &|v| ag.sqrt(v),
        &|v| ag.silu(v),
        &|v| ag.exp(v),
        &|v| ag.log(v),
        &|v| ag.gelu(v),
        &|v| ag.mul(v, v),
        &|v| ag.recip(&ag.add_scalar(v, 1.0)?),
        &|v| ag.rsqrt(v),
        &|v| ag.relu(v),
        &|v| ag.softmax(v),
        &|v| ag.log_softmax(v),
    ];
    let mut v = x.clone();
    for step in steps {
        v = step(&v)?;
        each();
    }
    Ok(v)
}

#[test]
fn constants_chain_keeps_at_most_three_leases() {
    let (ctx, ag) = setup();
    let base = ctx.pool_stats();
    let x = Var::constant(ctx.randn(&[64, 64], DType::F32, 0.0, 1.0, 1).unwrap());
    let one = ctx.pool_stats().outstanding_bytes - base.outstanding_bytes;
    let mut most = 0;
    let y = chain(&ag, &x, || {
        most = most.max(ctx.pool_stats().outstanding - base.outstanding)
    })
    .unwrap();
    assert!(most <= 3, "{most} leases outstanding in a constant chain");
    // Peak bytes see inside each op too (output allocated while its input lives); the
    // recip step's `+1` temporary makes four at most.
    let peak = ctx.pool_stats().peak_outstanding_bytes - base.outstanding_bytes;
    assert!(peak <= 4 * one, "peak {peak} bytes vs {one} per tensor");
    drop((x, y));
    assert_eq!(ctx.pool_stats().outstanding, base.outstanding);
}

#[test]
fn variable_chain_retains_until_backward_then_frees() {
    let (ctx, ag) = setup();
    let base = ctx.pool_stats().outstanding;
    let x = Var::variable(ctx.randn(&[64, 64], DType::F32, 0.0, 1.0, 1).unwrap());
    let mut during = Vec::new();
    let y = chain(&ag, &x, || during.push(ctx.pool_stats().outstanding - base)).unwrap();
    assert!(
        during.windows(2).all(|w| w[1] >= w[0]),
        "retained intermediates only grow: {during:?}"
    );
    // Every op but the scalar add/mul keeps its input or output (the +1 inside the
    // recip step is kept by recip), plus x and y themselves.
    let retained = ctx.pool_stats().outstanding - base;
    assert!(retained >= 12, "{retained} leases retained by the tape");
    let loss = ag.sum_all(&y).unwrap();
    let grads = ag.backward(&loss).unwrap();
    // After backward: x, y, the loss and x's gradient; every saved view is released.
    assert_eq!(
        ctx.pool_stats().outstanding - base,
        4,
        "saved tensors freed after backward"
    );
    drop((grads, loss, y, x));
    assert_eq!(ctx.pool_stats().outstanding, base);
}

#[test]
fn an_unused_graph_frees_everything_when_dropped() {
    let (ctx, ag) = setup();
    let base = ctx.pool_stats().outstanding;
    let x = Var::variable(ctx.randn(&[32, 32], DType::F32, 0.0, 1.0, 1).unwrap());
    let y = chain(&ag, &x, || {}).unwrap();
    assert!(ctx.pool_stats().outstanding - base >= 12);
    drop(y);
    assert_eq!(ctx.pool_stats().outstanding - base, 1, "only x remains");
    drop(x);
    assert_eq!(ctx.pool_stats().outstanding, base);
}

#[test]
fn vars_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Var>();
    assert_send_sync::<Autograd>();
}
