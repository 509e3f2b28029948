//! Optimizers (against hand-computed updates), in-place updates and steady-state
//! allocation, schedule, clipping, and the parameter store's safetensors round trip.

use std::path::Path;

use tempra_autograd::optim::{
    AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig, WarmupCosine, clip_grad_norm, global_grad_norm,
};
use tempra_autograd::{Autograd, AutogradError, GradStore, ParamId, ParamStore, Var, safetensors};
use tempra_tensor::{DType, ExecContext};

fn setup() -> (ExecContext, Autograd) {
    let ctx = ExecContext::reference();
    (ctx.clone(), Autograd::new(ctx))
}

/// Gradients of `Σ p·c` for a constant `c`: exactly `c`.
fn grads_of_dot(ag: &Autograd, p: &Var, c: &[f32]) -> GradStore {
    let c = Var::constant(ag.ctx().from_slice(c, p.dims()).unwrap());
    let loss = ag.sum_all(&ag.mul(p, &c).unwrap()).unwrap();
    ag.backward(&loss).unwrap()
}

fn values(params: &ParamStore, id: ParamId) -> Vec<f64> {
    params[id].tensor().to_vec_f64().unwrap()
}

#[test]
fn sgd_with_momentum_matches_the_formula() {
    let (ctx, ag) = setup();
    let mut params = ParamStore::new();
    let p = params
        .add("p", ctx.from_slice(&[1.0f32, -1.0], &[2]).unwrap())
        .unwrap();
    let mut opt = Sgd::new(SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        weight_decay: 0.0,
    })
    .unwrap();
    let g = [0.5f32, 2.0];
    let (mut v, mut want) = ([0.0f64; 2], [1.0f64, -1.0]);
    for _ in 0..3 {
        let grads = grads_of_dot(&ag, &params[p], &g);
        opt.step(&ctx, &mut params, &grads).unwrap();
        for i in 0..2 {
            v[i] = 0.9 * v[i] + g[i] as f64;
            want[i] -= 0.1 * v[i];
        }
    }
    for (a, b) in values(&params, p).iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}

#[test]
fn adamw_matches_the_formula() {
    let (ctx, ag) = setup();
    let mut params = ParamStore::new();
    let p = params
        .add("p", ctx.from_slice(&[0.5f64, -2.0, 3.0], &[3]).unwrap())
        .unwrap();
    let config = AdamWConfig {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0.1,
    };
    let mut opt = AdamW::new(config).unwrap();
    let gs = [[0.3f32, -0.1, 2.0], [0.1, 0.4, -1.0], [-0.2, 0.0, 0.5]];
    let mut want = [0.5f64, -2.0, 3.0];
    let (mut m, mut v) = ([0.0f64; 3], [0.0f64; 3]);
    for (t, g) in gs.iter().enumerate() {
        let grads = {
            let c = Var::constant(ctx.from_slice(&g.map(|x| x as f64), &[3]).unwrap());
            let loss = ag.sum_all(&ag.mul(&params[p], &c).unwrap()).unwrap();
            ag.backward(&loss).unwrap()
        };
        opt.step(&ctx, &mut params, &grads).unwrap();
        let t = t as i32 + 1;
        for i in 0..3 {
            let g = g[i] as f64;
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.99 * v[i] + 0.01 * g * g;
            let (mh, vh) = (
                m[i] / (1.0 - 0.9f64.powi(t)),
                v[i] / (1.0 - 0.99f64.powi(t)),
            );
            want[i] = want[i] * (1.0 - 0.01 * 0.1) - 0.01 * mh / (vh.sqrt() + 1e-8);
        }
    }
    for (a, b) in values(&params, p).iter().zip(want) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn updates_are_in_place_and_a_steady_step_allocates_nothing() {
    let (ctx, ag) = setup();
    let mut params = ParamStore::new();
    let w = params
        .add("w", ctx.randn(&[8, 16], DType::F32, 0.0, 0.1, 1).unwrap())
        .unwrap();
    let b = params
        .add("b", ctx.zeros(&[8], DType::F32).unwrap())
        .unwrap();
    let x = Var::constant(ctx.randn(&[4, 16], DType::F32, 0.0, 1.0, 2).unwrap());
    let mut opt = AdamW::new(AdamWConfig::default()).unwrap();
    let addr = |params: &ParamStore| params[w].tensor().host_slice::<f32>().unwrap().as_ptr();
    let before = addr(&params);
    let mut misses = Vec::new();
    for _ in 0..5 {
        let grads = {
            let y = ag.linear(&x, &params[w], Some(&params[b])).unwrap();
            ag.backward(&ag.mean_all(&ag.sqr(&y).unwrap()).unwrap())
                .unwrap()
        }; // the graph is dropped here
        let report = opt.step(&ctx, &mut params, &grads).unwrap();
        assert_eq!((report.updated, report.in_place, report.skipped), (2, 2, 0));
        misses.push(ctx.pool_stats().misses);
    }
    assert_eq!(addr(&params), before, "the parameter kept its buffer");
    assert_eq!(
        misses[2], misses[4],
        "steps 3-5 took every buffer from the pool's cache: {misses:?}"
    );
}

#[test]
fn a_clone_held_outside_the_store_forces_a_copy_and_goes_stale() {
    let (ctx, ag) = setup();
    let mut params = ParamStore::new();
    let p = params
        .add("p", ctx.from_slice(&[1.0f32], &[1]).unwrap())
        .unwrap();
    let stale = params[p].clone();
    let grads = grads_of_dot(&ag, &params[p], &[1.0]);
    let mut opt = Sgd::new(SgdConfig {
        lr: 0.5,
        ..SgdConfig::default()
    })
    .unwrap();
    let report = opt.step(&ctx, &mut params, &grads).unwrap();
    assert_eq!((report.updated, report.in_place), (1, 0));
    assert_eq!(values(&params, p), [0.5]);
    assert_eq!(stale.tensor().to_vec_f32().unwrap(), [1.0]);
}

#[test]
fn optimizer_settings_are_checked() {
    assert!(matches!(
        AdamW::new(AdamWConfig {
            beta1: 1.0,
            ..AdamWConfig::default()
        }),
        Err(AutogradError::Argument { .. })
    ));
    assert!(matches!(
        Sgd::new(SgdConfig {
            lr: f64::NAN,
            ..SgdConfig::default()
        }),
        Err(AutogradError::Argument { .. })
    ));
}

#[test]
fn warmup_cosine_schedule() {
    let s = WarmupCosine {
        peak_lr: 1.0,
        min_lr: 0.1,
        warmup_steps: 4,
        total_steps: 104,
    };
    assert_eq!([s.lr(0), s.lr(1), s.lr(3)], [0.25, 0.5, 1.0]);
    assert!((s.lr(54) - 0.55).abs() < 1e-12);
    let lrs: Vec<f64> = (4..=104).map(|i| s.lr(i)).collect();
    assert!(lrs.windows(2).all(|w| w[1] <= w[0]));
    assert_eq!(s.lr(104), 0.1);
    assert_eq!(s.lr(1000), 0.1);
}

#[test]
fn clipping_scales_to_the_max_norm() {
    let (ctx, ag) = setup();
    let a = Var::variable(ctx.from_slice(&[0.0f32, 0.0], &[2]).unwrap());
    let b = Var::variable(ctx.from_slice(&[0.0f32], &[1]).unwrap());
    let ca = Var::constant(ctx.from_slice(&[3.0f32, 0.0], &[2]).unwrap());
    let cb = Var::constant(ctx.from_slice(&[4.0f32], &[1]).unwrap());
    let loss = ag
        .add(
            &ag.sum_all(&ag.mul(&a, &ca).unwrap()).unwrap(),
            &ag.sum_all(&ag.mul(&b, &cb).unwrap()).unwrap(),
        )
        .unwrap();
    let mut grads = ag.backward(&loss).unwrap();
    assert!((global_grad_norm(&ctx, &grads).unwrap() - 5.0).abs() < 1e-9);
    assert!((clip_grad_norm(&ctx, &mut grads, 1.0).unwrap() - 5.0).abs() < 1e-9);
    let ga = grads.get(&a).unwrap().to_vec_f32().unwrap();
    assert!((ga[0] - 0.6).abs() < 1e-6);
    assert!((global_grad_norm(&ctx, &grads).unwrap() - 1.0).abs() < 1e-6);
    // Under the limit: untouched.
    assert!((clip_grad_norm(&ctx, &mut grads, 10.0).unwrap() - 1.0).abs() < 1e-6);
}

#[test]
fn param_store_safetensors_round_trip() {
    let (ctx, _) = setup();
    let dir = std::env::temp_dir().join(format!("tempra-autograd-st-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("params.safetensors");
    let mut params = ParamStore::new();
    let w = params
        .add(
            "layer.w",
            ctx.randn(&[3, 5], DType::F32, 0.0, 1.0, 1).unwrap(),
        )
        .unwrap();
    params
        .add("layer.b", ctx.from_slice(&[1.5f64, -2.0], &[2]).unwrap())
        .unwrap();
    params
        .add_frozen("ids", ctx.from_slice(&[7u32, 9], &[2]).unwrap())
        .unwrap();
    params
        .add(
            "half",
            ctx.from_slice(&[half::f16::from_f32(0.5)], &[1]).unwrap(),
        )
        .unwrap();
    params
        .save_safetensors(&ctx, &path, &[("step", "42")])
        .unwrap();

    let loaded = ParamStore::from_safetensors(&ctx, &path).unwrap();
    assert_eq!(loaded.len(), 4);
    for (_, name, var) in params.iter() {
        let other = loaded.get(name).unwrap();
        assert_eq!(
            (other.dims(), other.dtype()),
            (var.dims(), var.dtype()),
            "{name}"
        );
        assert_eq!(
            other.tensor().to_vec_f64().unwrap(),
            var.tensor().to_vec_f64().unwrap(),
            "{name}"
        );
    }
    let file = safetensors::load(&ctx, &path).unwrap();
    assert_eq!(file.metadata, [("step".to_string(), "42".to_string())]);
    assert_eq!(
        file.tensors[0].0, "layer.w",
        "file order is insertion order"
    );

    // Loading into an existing store keeps ids and checks shapes.
    let old_id = params[w].id();
    params
        .set(w, ctx.zeros(&[3, 5], DType::F32).unwrap())
        .unwrap();
    assert_eq!(params.load_safetensors(&ctx, &path).unwrap(), 4);
    assert_eq!(params[w].id(), old_id);
    assert_ne!(params[w].tensor().to_vec_f32().unwrap(), vec![0.0; 15]);
    let mut other = ParamStore::new();
    other
        .add("layer.w", ctx.zeros(&[5, 3], DType::F32).unwrap())
        .unwrap();
    assert!(matches!(
        other.load_safetensors(&ctx, &path),
        Err(AutogradError::Parameter { .. })
    ));
    let mut missing = ParamStore::new();
    missing
        .add("nope", ctx.zeros(&[1], DType::F32).unwrap())
        .unwrap();
    assert!(matches!(
        missing.load_safetensors(&ctx, &path),
        Err(AutogradError::Parameter { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn strided_tensors_are_saved_in_row_major_order() {
    let (ctx, _) = setup();
    let t = ctx
        .from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .unwrap()
        .t()
        .unwrap();
    let bytes = safetensors::serialize(&ctx, &[("t", &t)], &[]).unwrap();
    let back = safetensors::deserialize(&ctx, &bytes, Path::new("mem")).unwrap();
    assert_eq!(
        back.tensors[0].1.to_vec_f32().unwrap(),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
}

#[test]
fn malformed_safetensors_are_errors_not_panics() {
    let (ctx, _) = setup();
    let good = safetensors::serialize(
        &ctx,
        &[("x", &ctx.zeros(&[2, 2], DType::F32).unwrap())],
        &[],
    )
    .unwrap();
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let with_header = |json: &str| {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b.extend_from_slice(&[0u8; 16]);
        b
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("short", vec![1, 2, 3]),
        ("header too long", {
            let mut b = good.clone();
            b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
            b
        }),
        ("truncated data", good[..8 + header_len + 3].to_vec()),
        ("not json", with_header("{nope")),
        ("not an object", with_header("[1, 2]")),
        (
            "bad dtype",
            with_header(r#"{"x":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}"#),
        ),
        (
            "bad shape",
            with_header(r#"{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#),
        ),
        (
            "wrong size",
            with_header(r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#),
        ),
        (
            "offsets past end",
            with_header(r#"{"x":{"dtype":"U8","shape":[32],"data_offsets":[0,32]}}"#),
        ),
        (
            "reversed offsets",
            with_header(r#"{"x":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}}"#),
        ),
        (
            "overflowing shape",
            with_header(
                r#"{"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}}"#,
            ),
        ),
        ("bad metadata", with_header(r#"{"__metadata__":{"a":1}}"#)),
    ];
    for (what, bytes) in cases {
        let err = safetensors::deserialize(&ctx, &bytes, Path::new("bad.safetensors")).unwrap_err();
        assert!(matches!(err, AutogradError::Format { .. }), "{what}: {err}");
        assert!(err.to_string().contains("bad.safetensors"), "{what}: {err}");
    }
    let q = ctx
        .quantize(&ctx.zeros(&[1, 32], DType::F32).unwrap(), DType::Q8_0)
        .unwrap();
    assert!(matches!(
        safetensors::serialize(&ctx, &[("q", &q)], &[]),
        Err(AutogradError::Parameter { .. })
    ));
    let missing =
        ParamStore::from_safetensors(&ctx, Path::new("/nonexistent/x.safetensors")).unwrap_err();
    assert!(matches!(missing, AutogradError::Io { .. }), "{missing}");
}
