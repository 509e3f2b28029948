//! A finite-difference check of every backward rule, on random F64 inputs, including
//! broadcast, batched and strided (transposed, narrowed) inputs.

use tempra_autograd::gradcheck::{GradcheckOptions, gradcheck};
use tempra_autograd::{Autograd, AutogradError, Result, Var};
use tempra_tensor::{
    AttentionParams, BinaryOp, DType, ExecContext, ReduceOp, RopeConfig, RopeStyle, Tensor, UnaryOp,
};

fn ag() -> Autograd {
    Autograd::new(ExecContext::reference())
}

fn randn(ag: &Autograd, dims: &[usize], seed: u64) -> Tensor {
    ag.ctx().randn(dims, DType::F64, 0.0, 1.0, seed).unwrap()
}

fn rand(ag: &Autograd, dims: &[usize], low: f64, high: f64, seed: u64) -> Tensor {
    ag.ctx().rand(dims, DType::F64, low, high, seed).unwrap()
}

/// Values of magnitude in [0.2, 1.5] with random signs: away from the kinks at 0.
fn away_from_zero(ag: &Autograd, dims: &[usize], seed: u64) -> Tensor {
    let mag = rand(ag, dims, 0.2, 1.5, seed).to_vec_f64().unwrap();
    let sign = rand(ag, dims, -1.0, 1.0, seed + 1).to_vec_f64().unwrap();
    let v: Vec<f64> = mag
        .iter()
        .zip(&sign)
        .map(|(m, s)| if *s < 0.0 { -m } else { *m })
        .collect();
    ag.ctx().from_slice(&v, dims).unwrap()
}

fn check<F>(what: &str, ag: &Autograd, inputs: Vec<Tensor>, f: F)
where
    F: Fn(&Autograd, &[Var]) -> Result<Var>,
{
    match gradcheck(ag, &inputs, f, &GradcheckOptions::default()) {
        Ok(report) => assert!(report.checked > 0, "{what}: nothing checked"),
        Err(e) => panic!("{what}: {e}"),
    }
}

#[test]
fn unary_ops() {
    let ag = ag();
    for (i, op) in UnaryOp::ALL.into_iter().enumerate() {
        let seed = 100 + i as u64;
        let x = match op {
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => rand(&ag, &[3, 4], 0.3, 2.0, seed),
            UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Recip => away_from_zero(&ag, &[3, 4], seed),
            _ => randn(&ag, &[3, 4], seed),
        };
        check(op.name(), &ag, vec![x.clone()], |ag, v| ag.unary(op, &v[0]));
        // The same op on a transposed (strided) view.
        check(op.name(), &ag, vec![x], |ag, v| ag.unary(op, &v[0].t()?));
    }
}

#[test]
fn gelu_erf_at_zero_is_one_half() {
    let ag = ag();
    let x = Var::variable(ag.ctx().from_slice(&[0.0f64, 1e-20, -1e-20], &[3]).unwrap());
    let y = ag.sum_all(&ag.gelu_erf(&x).unwrap()).unwrap();
    let g = ag.backward(&y).unwrap();
    for v in g.get(&x).unwrap().to_vec_f64().unwrap() {
        assert!((v - 0.5).abs() < 1e-12, "{v}");
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    let ag = ag();
    let shapes: &[(&[usize], &[usize])] = &[
        (&[2, 3], &[2, 3]),
        (&[2, 3], &[3]),
        (&[2, 1], &[1, 3]),
        (&[4], &[2, 3, 4]),
        (&[2, 1, 4], &[3, 1]),
    ];
    for (i, op) in BinaryOp::ALL.into_iter().enumerate() {
        for (j, (sa, sb)) in shapes.iter().enumerate() {
            let seed = 1000 + 10 * i as u64 + j as u64;
            let a = randn(&ag, sa, seed);
            let b = if op == BinaryOp::Div {
                away_from_zero(&ag, sb, seed + 5)
            } else {
                randn(&ag, sb, seed + 5)
            };
            check(
                &format!("{} {sa:?} {sb:?}", op.name()),
                &ag,
                vec![a, b],
                |ag, v| ag.binary(op, &v[0], &v[1]),
            );
        }
        // Strided: a transposed lhs against a broadcast row.
        let a = randn(&ag, &[4, 3], 7);
        let b = if op == BinaryOp::Div {
            away_from_zero(&ag, &[4], 8)
        } else {
            randn(&ag, &[4], 8)
        };
        check(op.name(), &ag, vec![a, b], |ag, v| {
            ag.binary(op, &v[0].t()?, &v[1])
        });
    }
}

#[test]
fn the_same_variable_on_both_sides_accumulates() {
    let ag = ag();
    let x = randn(&ag, &[2, 3], 3);
    check("x*x", &ag, vec![x.clone()], |ag, v| ag.mul(&v[0], &v[0]));
    check("x/x+x", &ag, vec![x], |ag, v| {
        ag.add(&ag.maximum(&v[0], &ag.mul_scalar(&v[0], 0.5)?)?, &v[0])
    });
}

#[test]
fn scalar_ops() {
    let ag = ag();
    for op in BinaryOp::ALL {
        let x = randn(&ag, &[3, 4], 11);
        check(op.name(), &ag, vec![x], |ag, v| {
            ag.binary_scalar(op, &v[0], 0.3)
        });
    }
}

#[test]
fn add_inplace_keeps_both_gradients() {
    let ag = ag();
    check(
        "add_inplace",
        &ag,
        vec![randn(&ag, &[2, 3], 1), randn(&ag, &[3], 2)],
        |ag, v| {
            let a = ag.exp(&v[0])?;
            ag.add_inplace(a, &v[1])
        },
    );
}

#[test]
fn reductions() {
    let ag = ag();
    let x = randn(&ag, &[2, 3, 4], 21);
    for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
        for dim in 0..3 {
            for keepdim in [false, true] {
                let what = format!("{} dim {dim} keepdim {keepdim}", op.name());
                check(&what, &ag, vec![x.clone()], |ag, v| {
                    ag.reduce(op, &v[0], dim, keepdim)
                });
            }
        }
        check(op.name(), &ag, vec![x.clone()], |ag, v| {
            ag.reduce(op, &v[0].transpose(0, 2)?, 1, false)
        });
    }
    check("sum_all", &ag, vec![x.clone()], |ag, v| {
        ag.sum_all(&v[0].t()?)
    });
    check("mean_all", &ag, vec![x], |ag, v| ag.mean_all(&v[0]));
}

#[test]
fn softmax_and_log_softmax() {
    let ag = ag();
    let x = randn(&ag, &[3, 5], 31);
    check("softmax", &ag, vec![x.clone()], |ag, v| ag.softmax(&v[0]));
    check("log_softmax", &ag, vec![x.clone()], |ag, v| {
        ag.log_softmax(&v[0])
    });
    check("softmax strided", &ag, vec![x.clone()], |ag, v| {
        ag.softmax(&v[0].t()?)
    });
    check("log_softmax strided", &ag, vec![x], |ag, v| {
        ag.log_softmax(&v[0].t()?)
    });
}

#[test]
fn matmul_plain_batched_broadcast_and_transposed() {
    let ag = ag();
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 4], &[4, 5]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[3, 4], &[2, 4, 5]),
        (&[2, 3, 4], &[4, 5]),
        (&[2, 1, 3, 4], &[3, 4, 2]),
    ];
    for (i, (sa, sb)) in cases.iter().enumerate() {
        let (a, b) = (randn(&ag, sa, 40 + i as u64), randn(&ag, sb, 50 + i as u64));
        check(
            &format!("matmul {sa:?} {sb:?}"),
            &ag,
            vec![a, b],
            |ag, v| ag.matmul(&v[0], &v[1]),
        );
    }
    // aᵀ·bᵀ from stored [K, M] and [N, K].
    let (a, b) = (randn(&ag, &[4, 3], 61), randn(&ag, &[5, 4], 62));
    check("matmul transposed", &ag, vec![a, b], |ag, v| {
        ag.matmul(&v[0].t()?, &v[1].t()?)
    });
    // A batched product over a permuted view.
    let (a, b) = (randn(&ag, &[3, 2, 4], 63), randn(&ag, &[2, 4, 3], 64));
    check("matmul permuted", &ag, vec![a, b], |ag, v| {
        ag.matmul(&v[0].permute(&[1, 0, 2])?, &v[1])
    });
    // Only one side a variable.
    let c = randn(&ag, &[4, 5], 65);
    check(
        "matmul const rhs",
        &ag,
        vec![randn(&ag, &[3, 4], 66)],
        |ag, v| ag.matmul(&v[0], &Var::constant(c.clone())),
    );
}

#[test]
fn linear_with_and_without_bias() {
    let ag = ag();
    let (x, w, b) = (
        randn(&ag, &[2, 3, 4], 71),
        randn(&ag, &[5, 4], 72),
        randn(&ag, &[5], 73),
    );
    check(
        "linear+bias",
        &ag,
        vec![x.clone(), w.clone(), b],
        |ag, v| ag.linear(&v[0], &v[1], Some(&v[2])),
    );
    check("linear", &ag, vec![x, w.clone()], |ag, v| {
        ag.linear(&v[0], &v[1], None)
    });
    check(
        "linear rank 1",
        &ag,
        vec![randn(&ag, &[4], 74), w.clone()],
        |ag, v| ag.linear(&v[0], &v[1], None),
    );
    check(
        "linear strided x",
        &ag,
        vec![randn(&ag, &[4, 3], 75), w],
        |ag, v| ag.linear(&v[0].t()?, &v[1], None),
    );
}

#[test]
fn linear_with_a_quantized_weight_differentiates_the_activation_only() {
    let ag = ag();
    let ctx = ag.ctx();
    let dense = ctx.randn(&[8, 32], DType::F32, 0.0, 1.0, 81).unwrap();
    let wq = ctx.quantize(&dense, DType::Q8_0).unwrap();
    let wd = ctx.cast(&wq, DType::F32).unwrap();
    let x = Var::variable(ctx.randn(&[3, 32], DType::F32, 0.0, 1.0, 82).unwrap());
    let gq = {
        let y = ag
            .sum_all(
                &ag.sqr(&ag.linear(&x, &Var::constant(wq.clone()), None).unwrap())
                    .unwrap(),
            )
            .unwrap();
        ag.backward(&y)
            .unwrap()
            .get(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap()
    };
    let gd = {
        let y = ag
            .sum_all(
                &ag.sqr(&ag.linear(&x, &Var::constant(wd), None).unwrap())
                    .unwrap(),
            )
            .unwrap();
        ag.backward(&y)
            .unwrap()
            .get(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap()
    };
    for (a, b) in gq.iter().zip(&gd) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
    let err = ag.linear(&x, &Var::variable(wq), None).unwrap_err();
    assert!(
        matches!(err, AutogradError::NotDifferentiable { op: "linear", .. }),
        "{err}"
    );
}

#[test]
fn norms() {
    let ag = ag();
    let (x, w, b) = (
        randn(&ag, &[2, 3, 8], 91),
        randn(&ag, &[8], 92),
        randn(&ag, &[8], 93),
    );
    check("rms_norm", &ag, vec![x.clone(), w.clone()], |ag, v| {
        ag.rms_norm(&v[0], &v[1], 1e-5)
    });
    check(
        "layer_norm+b",
        &ag,
        vec![x.clone(), w.clone(), b],
        |ag, v| ag.layer_norm(&v[0], &v[1], Some(&v[2]), 1e-5),
    );
    check("layer_norm", &ag, vec![x, w.clone()], |ag, v| {
        ag.layer_norm(&v[0], &v[1], None, 1e-5)
    });
    let xt = randn(&ag, &[8, 3], 94);
    check(
        "rms_norm strided",
        &ag,
        vec![xt.clone(), w.clone()],
        |ag, v| ag.rms_norm(&v[0].t()?, &v[1], 1e-5),
    );
    check("layer_norm strided", &ag, vec![xt, w], |ag, v| {
        ag.layer_norm(&v[0].t()?, &v[1], None, 1e-5)
    });
}

#[test]
fn rope_both_styles_partial_rotation_and_freq_factors() {
    let ag = ag();
    let positions = ag.ctx().from_slice(&[3u32, 4, 5, 9], &[4]).unwrap();
    let ff = ag.ctx().from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    for style in [RopeStyle::Interleaved, RopeStyle::Neox] {
        for rotary in [4, 8] {
            let config = RopeConfig::new(rotary, 10_000.0, style);
            let x = randn(&ag, &[4, 2, 8], 101);
            check(
                &format!("rope {style:?} {rotary}"),
                &ag,
                vec![x],
                |ag, v| ag.rope(&v[0], &positions, &config, None),
            );
        }
        let config = RopeConfig::new(4, 500.0, style);
        check(
            "rope freq factors",
            &ag,
            vec![randn(&ag, &[1, 4, 2, 8], 102)],
            |ag, v| ag.rope(&v[0], &positions, &config, Some(&ff)),
        );
    }
}

#[test]
fn embedding_scatter_adds_repeated_ids() {
    let ag = ag();
    let ids = ag
        .ctx()
        .from_slice(&[1u32, 4, 1, 0, 4, 4], &[2, 3])
        .unwrap();
    check("embedding", &ag, vec![randn(&ag, &[6, 5], 111)], |ag, v| {
        ag.embedding(&v[0], &ids)
    });
}

#[test]
fn top_k_values_and_gather_scatter_into_the_chosen_positions() {
    let ag = ag();
    // The values' gradient reaches the chosen positions; the rest get zeros.
    check("top_k", &ag, vec![randn(&ag, &[3, 7], 121)], |ag, v| {
        Ok(ag.top_k(&v[0], 3)?.0)
    });
    check(
        "top_k strided",
        &ag,
        vec![randn(&ag, &[7, 2], 122)],
        |ag, v| Ok(ag.top_k(&v[0].t()?, 2)?.0),
    );
    let picks = ag
        .ctx()
        .from_slice(&[4u32, 0, 4, 1, 1, 2], &[2, 3])
        .unwrap();
    check("gather", &ag, vec![randn(&ag, &[2, 5], 123)], |ag, v| {
        ag.gather(&v[0], &picks)
    });
    // The router path of a mixture of experts: softmax, top_k, renormalised weights.
    check("routing", &ag, vec![randn(&ag, &[3, 6], 124)], |ag, v| {
        let probs = ag.softmax(&v[0])?;
        let (_, chosen) = ag.top_k(&v[0], 2)?;
        let picked = ag.gather(&probs, &chosen)?;
        ag.div(&picked, &ag.sum(&picked, 1, true)?)
    });
}

#[test]
fn weighted_sum_over_slots() {
    let ag = ag();
    check(
        "weighted_sum",
        &ag,
        vec![randn(&ag, &[3, 2, 5], 131), randn(&ag, &[3, 2], 132)],
        |ag, v| ag.weighted_sum(&v[0], &v[1]),
    );
    check(
        "weighted_sum strided",
        &ag,
        vec![randn(&ag, &[2, 5, 4], 133), randn(&ag, &[2, 4], 134)],
        |ag, v| ag.weighted_sum(&v[0].transpose(1, 2)?, &v[1]),
    );
}

#[test]
fn expert_linear_input_weight_and_bias() {
    let ag = ag();
    // Expert 3 is chosen twice by token 0, expert 1 by nobody.
    let ids = ag
        .ctx()
        .from_slice(&[3u32, 3, 0, 2, 2, 0], &[3, 2])
        .unwrap();
    let (w, b) = (randn(&ag, &[4, 5, 6], 141), randn(&ag, &[4, 5], 142));
    check(
        "expert_linear+bias",
        &ag,
        vec![randn(&ag, &[3, 2, 6], 143), w.clone(), b],
        |ag, v| ag.expert_linear(&v[0], &v[1], &ids, Some(&v[2])),
    );
    check(
        "expert_linear broadcast x",
        &ag,
        vec![randn(&ag, &[3, 1, 6], 144), w],
        |ag, v| ag.expert_linear(&v[0], &v[1], &ids, None),
    );
}

#[test]
fn expert_linear_with_quantized_experts_differentiates_the_input_only() {
    let ag = ag();
    let ctx = ag.ctx();
    let dense = ctx.randn(&[3, 8, 32], DType::F32, 0.0, 1.0, 151).unwrap();
    let wq = ctx.quantize(&dense, DType::Q8_0).unwrap();
    let wd = ctx.cast(&wq, DType::F32).unwrap();
    let ids = ctx.from_slice(&[2u32, 0, 1, 2], &[2, 2]).unwrap();
    let x = Var::variable(ctx.randn(&[2, 2, 32], DType::F32, 0.0, 1.0, 152).unwrap());
    let grad = |w: &Tensor| {
        let y = ag
            .expert_linear(&x, &Var::constant(w.clone()), &ids, None)
            .unwrap();
        let loss = ag.sum_all(&ag.sqr(&y).unwrap()).unwrap();
        ag.backward(&loss)
            .unwrap()
            .get(&x)
            .unwrap()
            .to_vec_f32()
            .unwrap()
    };
    let (gq, gd) = (grad(&wq), grad(&wd));
    for (a, b) in gq.iter().zip(&gd) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
    let err = ag
        .expert_linear(&x, &Var::variable(wq), &ids, None)
        .unwrap_err();
    assert!(
        matches!(
            err,
            AutogradError::NotDifferentiable {
                op: "expert_linear",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn causal_attention_gqa_window_softcap_offset() {
    let ag = ag();
    let d = 4;
    let cases = [
        ("causal", AttentionParams::causal(d, 0), 4, 4),
        (
            "window",
            AttentionParams {
                window: Some(2),
                ..AttentionParams::causal(d, 0)
            },
            4,
            4,
        ),
        (
            "softcap",
            AttentionParams {
                softcap: Some(2.0),
                ..AttentionParams::causal(d, 0)
            },
            4,
            4,
        ),
        ("q_start", AttentionParams::causal(d, 3), 2, 5),
    ];
    for (i, (what, params, tq, tk)) in cases.into_iter().enumerate() {
        let seed = 120 + 10 * i as u64;
        let q = randn(&ag, &[tq, 4, d], seed);
        let k = randn(&ag, &[tk, 2, d], seed + 1);
        let v = randn(&ag, &[tk, 2, 3], seed + 2);
        check(what, &ag, vec![q, k, v], |ag, v| {
            ag.attention(&v[0], &v[1], &v[2], &params)
        });
    }
    // Batched, with q, k, v as strided views of one fused projection.
    let qkv = randn(&ag, &[2, 3, 3, 2, d], 160);
    check("attention fused qkv", &ag, vec![qkv], |ag, v| {
        let (q, k, vv) = (v[0].select(2, 0)?, v[0].select(2, 1)?, v[0].select(2, 2)?);
        ag.attention(&q, &k, &vv, &AttentionParams::causal(d, 0))
    });
    // Attention sinks are inference-only: constants run, a tracked input is refused.
    let sinks = ag
        .ctx()
        .from_slice(&[0.5f32, -1.0, 2.0, 0.0], &[4])
        .unwrap();
    let (q, k, v) = (
        randn(&ag, &[3, 4, d], 170),
        randn(&ag, &[3, 2, d], 171),
        randn(&ag, &[3, 2, 3], 172),
    );
    let params = AttentionParams::causal(d, 0);
    let [cq, ck, cv] = [&q, &k, &v].map(|t| Var::constant(t.clone()));
    let out = ag
        .attention_with_sinks(&cq, &ck, &cv, Some(&sinks), &params)
        .unwrap();
    let plain = ag.attention(&cq, &ck, &cv, &params).unwrap();
    assert_eq!(out.dims(), plain.dims());
    assert_ne!(
        out.tensor().to_vec_f64().unwrap(),
        plain.tensor().to_vec_f64().unwrap()
    );
    let (q, k, v) = (Var::variable(q), Var::variable(k), Var::variable(v));
    let err = ag
        .attention_with_sinks(&q, &k, &v, Some(&sinks), &params)
        .unwrap_err();
    assert!(
        matches!(
            err,
            AutogradError::NotDifferentiable {
                op: "attention",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn cross_entropy_with_ignore_index() {
    let ag = ag();
    let targets = ag.ctx().from_slice(&[2u32, 0, 99, 6, 3], &[5]).unwrap();
    let logits = randn(&ag, &[5, 7], 171);
    check("cross_entropy", &ag, vec![logits.clone()], |ag, v| {
        ag.cross_entropy(&v[0], &targets, Some(99))
    });
    check("cross_entropy_rows", &ag, vec![logits], |ag, v| {
        ag.cross_entropy_rows(&v[0], &targets, Some(99))
    });
    let t2 = ag.ctx().from_slice(&[1u32, 0, 2, 2], &[2, 2]).unwrap();
    check(
        "cross_entropy batched",
        &ag,
        vec![randn(&ag, &[2, 2, 3], 172)],
        |ag, v| ag.cross_entropy(&v[0], &t2, None),
    );
}

#[test]
fn cross_entropy_is_the_mean_over_kept_rows() {
    let ag = ag();
    let targets = ag.ctx().from_slice(&[1u32, 7, 0], &[3]).unwrap();
    let logits = Var::variable(ag.ctx().zeros(&[3, 4], DType::F64).unwrap());
    let loss = ag.cross_entropy(&logits, &targets, Some(7)).unwrap();
    assert!((loss.tensor().to_vec_f64().unwrap()[0] - 4f64.ln()).abs() < 1e-12);
    let g = ag
        .backward(&loss)
        .unwrap()
        .get(&logits)
        .unwrap()
        .to_vec_f64()
        .unwrap();
    assert_eq!(&g[4..8], &[0.0; 4]); // the ignored row
    assert!((g[1] - (0.25 - 1.0) / 2.0).abs() < 1e-12);
}

#[test]
fn concat_and_contiguous() {
    let ag = ag();
    let (a, b, c) = (
        randn(&ag, &[2, 1, 3], 181),
        randn(&ag, &[2, 2, 3], 182),
        randn(&ag, &[3, 2], 183),
    );
    check("concat", &ag, vec![a, b, c], |ag, v| {
        ag.concat(&[&v[0], &v[1], &v[2].t()?.unsqueeze(1)?], 1)
    });
    check(
        "contiguous",
        &ag,
        vec![randn(&ag, &[3, 4], 184)],
        |ag, v| ag.contiguous(&v[0].t()?),
    );
}

#[test]
fn views() {
    let ag = ag();
    let x = randn(&ag, &[2, 3, 4], 191);
    check("narrow", &ag, vec![x.clone()], |_, v| v[0].narrow(2, 1, 2));
    check("reshape", &ag, vec![x.clone()], |_, v| {
        v[0].reshape(&[6, 4])
    });
    check("reshape after copy", &ag, vec![x.clone()], |ag, v| {
        ag.contiguous(&v[0].transpose(0, 2)?)?.reshape(&[4, 6])
    });
    check("permute", &ag, vec![x.clone()], |_, v| {
        v[0].permute(&[2, 0, 1])
    });
    check("transpose", &ag, vec![x.clone()], |_, v| {
        v[0].transpose(0, 1)
    });
    check("select", &ag, vec![x.clone()], |_, v| v[0].select(1, 2));
    check("squeeze/unsqueeze", &ag, vec![x.clone()], |_, v| {
        v[0].unsqueeze(1)?.narrow(2, 1, 1)?.squeeze(2)
    });
    check(
        "broadcast_to",
        &ag,
        vec![randn(&ag, &[3, 1], 192)],
        |_, v| v[0].broadcast_to(&[2, 3, 4]),
    );
    check("narrow of narrow", &ag, vec![x], |ag, v| {
        ag.exp(&v[0].narrow(0, 1, 1)?.narrow(1, 0, 2)?)
    });
}

#[test]
fn cast_sends_the_gradient_back_in_the_input_dtype() {
    let ag = ag();
    let x = Var::variable(ag.ctx().from_slice(&[1.0f32, 2.0], &[2]).unwrap());
    let y = ag
        .sum_all(&ag.sqr(&ag.cast(&x, DType::F64).unwrap()).unwrap())
        .unwrap();
    let g = ag.backward(&y).unwrap();
    let g = g.get(&x).unwrap();
    assert_eq!(g.dtype(), DType::F32);
    assert_eq!(g.to_vec_f32().unwrap(), [2.0, 4.0]);
}

#[test]
fn gradcheck_catches_a_wrong_gradient() {
    let ag = ag();
    // detach() hides x from the second factor: the analytic gradient of x·x is then x, not 2x.
    let err = gradcheck(
        &ag,
        &[randn(&ag, &[3], 1)],
        |ag, v| ag.mul(&v[0], &v[0].detach()),
        &GradcheckOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, AutogradError::Gradcheck { input: 0, .. }),
        "{err}"
    );
}
