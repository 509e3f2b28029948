//! End to end: a 2-layer MLP learns a synthetic classification task, and a tiny causal
//! transformer written over `Var` memorises a token sequence. Both smoothed loss curves
//! decrease monotonically.

mod common;

use common::tiny_transformer::{TinyConfig, TinyTransformer, window_means};
use tempra_autograd::optim::{
    AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig, WarmupCosine, clip_grad_norm,
};
use tempra_autograd::{Autograd, ParamStore, Var, no_grad};
use tempra_tensor::{DType, ExecContext};

#[test]
fn mlp_learns_xor_quadrants() {
    let ctx = ExecContext::reference();
    let ag = Autograd::new(ctx.clone());
    // 160 points in [-1, 1]², away from the axes; class 1 where x·y > 0.
    let raw = ctx
        .rand(&[400, 2], DType::F32, -1.0, 1.0, 7)
        .unwrap()
        .to_vec_f32()
        .unwrap();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for p in raw
        .chunks_exact(2)
        .filter(|p| p[0].abs() > 0.1 && p[1].abs() > 0.1)
        .take(160)
    {
        xs.extend_from_slice(p);
        ys.push(u32::from(p[0] * p[1] > 0.0));
    }
    let n = ys.len();
    let x = Var::constant(ctx.from_slice(&xs, &[n, 2]).unwrap());
    let y = ctx.from_slice(&ys, &[n]).unwrap();

    let mut params = ParamStore::new();
    let w1 = params
        .add("w1", ctx.randn(&[16, 2], DType::F32, 0.0, 1.0, 1).unwrap())
        .unwrap();
    let b1 = params
        .add("b1", ctx.zeros(&[16], DType::F32).unwrap())
        .unwrap();
    let w2 = params
        .add("w2", ctx.randn(&[2, 16], DType::F32, 0.0, 0.25, 2).unwrap())
        .unwrap();
    let b2 = params
        .add("b2", ctx.zeros(&[2], DType::F32).unwrap())
        .unwrap();
    let mut opt = Sgd::new(SgdConfig {
        lr: 0.2,
        momentum: 0.9,
        weight_decay: 0.0,
    })
    .unwrap();
    let forward = |params: &ParamStore| {
        let h = ag.tanh(&ag.linear(&x, &params[w1], Some(&params[b1]))?)?;
        ag.linear(&h, &params[w2], Some(&params[b2]))
    };
    let mut losses = Vec::new();
    for _ in 0..300 {
        let grads = {
            let loss = ag
                .cross_entropy(&forward(&params).unwrap(), &y, None)
                .unwrap();
            losses.push(loss.tensor().to_vec_f64().unwrap()[0]);
            ag.backward(&loss).unwrap()
        };
        let report = opt.step(&ctx, &mut params, &grads).unwrap();
        assert_eq!(report.in_place, 4);
    }
    let smooth = window_means(&losses, 30);
    eprintln!("mlp smoothed loss: {smooth:.4?}");
    assert!(
        smooth.windows(2).all(|w| w[1] < w[0]),
        "smoothed loss not decreasing: {smooth:?}"
    );
    let _guard = no_grad();
    let pred = ctx
        .argmax(forward(&params).unwrap().tensor(), 1, false)
        .unwrap()
        .to_vec::<u32>()
        .unwrap();
    let correct = pred.iter().zip(&ys).filter(|(a, b)| a == b).count();
    assert!(
        correct as f64 >= 0.95 * n as f64,
        "accuracy {correct}/{n}, losses {smooth:?}"
    );
}

#[test]
fn tiny_transformer_memorises_a_sequence() {
    let ctx = ExecContext::reference();
    let ag = Autograd::new(ctx.clone());
    let cfg = TinyConfig {
        vocab: 16,
        dim: 32,
        heads: 4,
        kv_heads: 2,
        ffn: 64,
        layers: 2,
    };
    let mut params = ParamStore::new();
    let model = TinyTransformer::new(&ctx, cfg, &mut params, 11).unwrap();
    let tokens: Vec<u32> = vec![3, 14, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3];
    let steps = 60;
    let schedule = WarmupCosine {
        peak_lr: 1e-2,
        min_lr: 1e-3,
        warmup_steps: 10,
        total_steps: steps,
    };
    let mut opt = AdamW::new(AdamWConfig {
        weight_decay: 0.0,
        ..AdamWConfig::default()
    })
    .unwrap();
    let base = ctx.pool_stats().outstanding;
    let mut losses = Vec::new();
    for step in 0..steps {
        let mut grads = {
            let loss = model.loss(&ag, &params, &tokens).unwrap();
            losses.push(loss.tensor().to_vec_f64().unwrap()[0]);
            ag.backward(&loss).unwrap()
        };
        clip_grad_norm(&ctx, &mut grads, 1.0).unwrap();
        opt.set_learning_rate(schedule.lr(step));
        let report = opt.step(&ctx, &mut params, &grads).unwrap();
        assert_eq!(report.in_place, params.len(), "step {step}");
        drop(grads);
        // Nothing new stays outstanding between steps: the optimizer's moments live in
        // persistent storage, outside the transient pool.
        assert_eq!(ctx.pool_stats().outstanding, base, "step {step}");
    }
    let smooth = window_means(&losses, 10);
    let last = *losses.last().unwrap();
    eprintln!("transformer smoothed loss: {smooth:.4?}, final {last:.5}");
    assert!(
        losses[0] > 2.0,
        "starts near chance (ln 16 ≈ 2.77): {}",
        losses[0]
    );
    assert!(last < 0.05, "final loss {last}; smoothed {smooth:?}");
    assert!(
        smooth.windows(2).all(|w| w[1] < w[0]),
        "smoothed loss not decreasing: {smooth:?}"
    );
}
