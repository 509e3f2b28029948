//! The mixture-of-experts ops on the reference backend beyond their numpy goldens
//! (`reference_ops.rs`): top_k's order with NaNs, signed zeros and ties, `expert_linear`
//! row by row against `linear` with the chosen expert's weights, and the errors each
//! op reports for bad input.

use tempra_tensor::{DType, ExecContext, Tensor, TensorError};

type Res<T> = anyhow::Result<T>;

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec_f32().expect("values")
}

fn argument_error(e: TensorError, op: &str, name: &str, mentions: &str) {
    match &e {
        TensorError::Argument { op: o, name: n, .. } if *o == op && *n == name => {
            assert!(e.to_string().contains(mentions), "{e}")
        }
        other => panic!("expected {op}'s {name} error, got {other:?}"),
    }
}

#[test]
fn top_k_puts_nan_first_and_breaks_ties_by_the_lower_index() -> Res<()> {
    let c = ExecContext::reference();
    let inf = f32::INFINITY;
    let x = c.from_slice(
        &[
            1.0,
            3.0,
            3.0,
            f32::NAN,
            -inf,
            2.0,
            f32::NAN, //
            -0.0,
            0.0,
            -1.0,
            inf,
            -inf,
            -0.0,
            0.5,
        ],
        &[2, 7],
    )?;
    let (v, i) = c.top_k(&x, 5)?;
    assert_eq!(i.to_vec::<u32>()?, [3, 6, 1, 2, 5, 3, 6, 0, 1, 5]);
    let v = values(&v);
    assert!(v[0].is_nan() && v[1].is_nan());
    assert_eq!(&v[2..], [3.0, 3.0, 2.0, inf, 0.5, -0.0, 0.0, -0.0]);
    // k = 0 and k = N; F64 keeps its dtype.
    let (v0, i0) = c.top_k(&x, 0)?;
    assert_eq!((v0.dims(), i0.dims()), (&[2, 0][..], &[2, 0][..]));
    let (v64, i_all) = c.top_k(&c.cast(&x, DType::F64)?, 7)?;
    assert_eq!(v64.dtype(), DType::F64);
    assert_eq!(i_all.to_vec::<u32>()?[7..], [3, 6, 0, 1, 5, 2, 4]);
    Ok(())
}

#[test]
fn expert_linear_rows_equal_linear_through_the_chosen_expert() -> Res<()> {
    let c = ExecContext::reference();
    let (tokens, slots, experts, n, k) = (3, 2, 4, 5, 64);
    let x = c.randn(&[tokens, slots, k], DType::F32, 0.0, 1.0, 1)?;
    let bias = c.randn(&[experts, n], DType::F32, 0.0, 1.0, 3)?;
    let ids = c.from_slice(&[3u32, 3, 0, 2, 2, 0], &[tokens, slots])?;
    for dtype in [DType::F32, DType::F16, DType::Q8_0, DType::Q4K] {
        let f = c.randn(
            &[experts, n, if dtype == DType::Q4K { 256 } else { k }],
            DType::F32,
            0.0,
            1.0,
            2,
        )?;
        let w = if dtype.is_quantized() {
            c.quantize(&f, dtype)?
        } else {
            c.cast(&f, dtype)?
        };
        let kk = w.dims()[2];
        let x = if kk == k {
            x.clone()
        } else {
            c.randn(&[tokens, slots, kk], DType::F32, 0.0, 1.0, 4)?
        };
        let out = c.expert_linear(&x, &w, &ids, Some(&bias))?;
        let one = c.expert_linear(&x.narrow(1, 0, 1)?, &w, &ids, None)?;
        let chosen = ids.to_vec::<u32>()?;
        for t in 0..tokens {
            for s in 0..slots {
                let e = chosen[t * slots + s] as usize;
                let row = x.select(0, t)?.select(0, s)?;
                let expert = w.select(0, e)?;
                let want = c.linear(&row, &expert, Some(&bias.select(0, e)?))?;
                let got = out.select(0, t)?.select(0, s)?;
                assert_eq!(values(&got), values(&want), "{dtype} token {t} slot {s}");
                // The broadcast input: slot s multiplies row 0 of the token.
                let row0 = x.select(0, t)?.select(0, 0)?;
                let want = c.linear(&row0, &expert, None)?;
                assert_eq!(values(&one.select(0, t)?.select(0, s)?), values(&want));
            }
        }
    }
    Ok(())
}

#[test]
fn bad_ids_and_shapes_are_errors_naming_the_op() -> Res<()> {
    let c = ExecContext::reference();
    let x = c.randn(&[2, 1, 8], DType::F32, 0.0, 1.0, 1)?;
    let w = c.randn(&[3, 4, 8], DType::F32, 0.0, 1.0, 2)?;
    let bad = c.from_slice(&[0u32, 1, 2, 3], &[2, 2])?;
    let e = c.expert_linear(&x, &w, &bad, None).unwrap_err();
    argument_error(e, "expert_linear", "ids", "expert 3 of token 1, slot 1");
    let ids = c.from_slice(&[0u32, 1, 2, 2], &[2, 2])?;
    for (x, w, ids) in [
        (x.clone(), w.reshape(&[12, 8])?, ids.clone()),
        (x.reshape(&[2, 8])?, w.clone(), ids.clone()),
        (x.clone(), w.clone(), ids.reshape(&[4])?),
        (x.clone(), w.clone(), c.cast(&ids, DType::F32)?),
    ] {
        assert!(c.expert_linear(&x, &w, &ids, None).is_err());
    }
    let x3 = c.randn(&[2, 3, 8], DType::F32, 0.0, 1.0, 3)?;
    assert!(matches!(
        c.expert_linear(&x3, &w, &ids, None),
        Err(TensorError::ShapeMismatch {
            op: "expert_linear",
            ..
        })
    ));
    let bias = c.randn(&[3, 5], DType::F32, 0.0, 1.0, 4)?;
    assert!(c.expert_linear(&x, &w, &ids, Some(&bias)).is_err());

    let router = c.randn(&[2, 4], DType::F32, 0.0, 1.0, 5)?;
    let e = c.top_k(&router, 5).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::Argument {
                op: "top_k",
                name: "k",
                ..
            }
        ),
        "{e}"
    );
    assert!(c.top_k(&c.cast(&router, DType::F16)?, 1).is_err());
    let picks = c.from_slice(&[0u32, 4, 1, 1], &[2, 2])?;
    let e = c.gather(&router, &picks).unwrap_err();
    argument_error(e, "gather", "indices", "index 4 at position 1");
    assert!(c.gather(&router, &picks.reshape(&[4])?).is_err());

    let slots = c.randn(&[2, 3, 4], DType::F32, 0.0, 1.0, 6)?;
    let weights = c.randn(&[2, 2], DType::F32, 0.0, 1.0, 7)?;
    assert!(matches!(
        c.weighted_sum(&slots, &weights),
        Err(TensorError::ShapeMismatch {
            op: "weighted_sum",
            ..
        })
    ));
    let weights = c.randn(&[2, 3], DType::F64, 0.0, 1.0, 7)?;
    assert!(matches!(
        c.weighted_sum(&slots, &weights),
        Err(TensorError::DTypeMismatch {
            op: "weighted_sum",
            ..
        })
    ));
    Ok(())
}

#[test]
fn a_prepared_stack_of_experts_needs_rank_2_or_3() -> Res<()> {
    let c = ExecContext::reference();
    let w = c.randn(&[2, 3, 4, 8], DType::F32, 0.0, 1.0, 1)?;
    assert!(matches!(
        c.prepare_weight(&w),
        Err(TensorError::Rank {
            op: "prepare_weight",
            ..
        })
    ));
    assert!(c.prepare_weight(&w.select(0, 0)?)?.is_none());
    Ok(())
}
