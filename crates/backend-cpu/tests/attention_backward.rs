//! The attention gradient (dq, dk, dv) against the reference: GQA groups, positions
//! (q_start), sliding windows, soft-cap, strided keys, a lead (batch) dim.

mod common;

use common::{check, randn};
use tempra_tensor::{AttentionParams, DType, ExecContext, Result, Tensor};

/// f32 scores, softmax and accumulation against the f64 reference.
const TOL: f64 = 4e-10;

#[derive(Clone, Copy, Debug)]
struct Case {
    lead: Option<usize>,
    tq: usize,
    tk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    q_start: usize,
    window: Option<usize>,
    softcap: Option<f32>,
    /// Keys as a `narrow` of a longer buffer.
    strided_k: bool,
}

const BASE: Case = Case {
    lead: None,
    tq: 13,
    tk: 13,
    hq: 4,
    hkv: 4,
    d: 16,
    q_start: 0,
    window: None,
    softcap: None,
    strided_k: false,
};

/// `which` of (dq, dk, dv) for `case` on `ctx`.
fn grads(ctx: &ExecContext, c: &Case, which: usize) -> Result<Tensor> {
    let dims = |t: usize, h: usize| match c.lead {
        Some(b) => vec![b, t, h, c.d],
        None => vec![t, h, c.d],
    };
    let q = randn(ctx, &dims(c.tq, c.hq), DType::F32, 1);
    let k = if c.strided_k {
        let t_dim = usize::from(c.lead.is_some());
        randn(ctx, &dims(c.tk + 6, c.hkv), DType::F32, 2).narrow(t_dim, 3, c.tk)?
    } else {
        randn(ctx, &dims(c.tk, c.hkv), DType::F32, 2)
    };
    let v = randn(ctx, &dims(c.tk, c.hkv), DType::F32, 3);
    let g = randn(ctx, &dims(c.tq, c.hq), DType::F32, 4);
    let params = AttentionParams {
        window: c.window,
        softcap: c.softcap,
        ..AttentionParams::causal(c.d, c.q_start)
    };
    let (dq, dk, dv) = ctx.attention_backward(&q, &k, &v, &params, &g)?;
    Ok([dq, dk, dv][which].clone())
}

fn check_case(what: &str, c: Case) {
    for (which, name) in ["dq", "dk", "dv"].iter().enumerate() {
        check(&format!("{what} {name} {c:?}"), TOL, |ctx| {
            grads(ctx, &c, which)
        });
    }
}

#[test]
fn causal_prefill() {
    check_case("causal", BASE);
}

#[test]
fn gqa_groups() {
    check_case(
        "gqa",
        Case {
            hq: 6,
            hkv: 2,
            ..BASE
        },
    );
    check_case(
        "mqa",
        Case {
            hq: 4,
            hkv: 1,
            ..BASE
        },
    );
}

#[test]
fn later_positions_windows_and_softcap() {
    check_case(
        "q_start",
        Case {
            tq: 4,
            tk: 15,
            q_start: 11,
            ..BASE
        },
    );
    check_case(
        "window",
        Case {
            window: Some(5),
            ..BASE
        },
    );
    check_case(
        "softcap",
        Case {
            softcap: Some(3.0),
            ..BASE
        },
    );
}

#[test]
fn strided_keys_and_a_lead_dim() {
    check_case(
        "strided",
        Case {
            strided_k: true,
            ..BASE
        },
    );
    check_case(
        "lead",
        Case {
            lead: Some(2),
            strided_k: true,
            ..BASE
        },
    );
}
