//! The training ops: cross-entropy and its backward (with an ignored target), one-hot,
//! the embedding's and attention's backward.

use tempra_tensor::{AttentionParams, DType};

use crate::budget::Precision;
use crate::case::{Case, Inputs, u32s};
use crate::error::Result;

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0x7A1);
    let targets = [3u32, 0, 32, 7, 7, 1, 20];
    for (label, ignore) in [("", None), (", target 7 ignored", Some(7u32))] {
        let logits = inputs.uniform(&[7, 33], -6.0, 6.0)?;
        cases.push(Case::new(
            "cross_entropy",
            format!("[7, 33]{label}"),
            Precision::Accumulated,
            vec![logits, u32s(&targets, &[7])?],
            move |c, i| Ok(vec![c.cross_entropy(&i[0], &i[1], ignore)?]),
        ));
        let logits = inputs.uniform(&[7, 33], -6.0, 6.0)?;
        let grad = inputs.normal(&[7])?;
        cases.push(Case::new(
            "cross_entropy_backward",
            format!("[7, 33]{label}"),
            Precision::Accumulated,
            vec![logits, u32s(&targets, &[7])?, grad],
            move |c, i| Ok(vec![c.cross_entropy_backward(&i[0], &i[1], ignore, &i[2])?]),
        ));
    }
    let ids = u32s(&[1, 4, 4, 0, 9], &[5])?;
    let grad = inputs.normal(&[5, 12])?;
    cases.push(Case::new(
        "embedding_backward",
        "5 ids (one repeated) into 10 rows",
        Precision::Accumulated,
        vec![ids.clone(), grad],
        |c, i| Ok(vec![c.embedding_backward(&i[0], &i[1], 10)?]),
    ));
    cases.push(Case::new(
        "one_hot",
        "5 ids, depth 10",
        Precision::Exact,
        vec![ids],
        |c, i| Ok(vec![c.one_hot(&i[0], 10, DType::F32)?]),
    ));
    for (label, tq, hq, hkv, window) in [
        ("4 heads over 2", 6usize, 4usize, 2usize, None),
        ("window 3", 5, 2, 2, Some(3usize)),
    ] {
        let q = inputs.normal(&[tq, hq, 16])?;
        let k = inputs.normal(&[tq, hkv, 16])?;
        let v = inputs.normal(&[tq, hkv, 16])?;
        let grad = inputs.normal(&[tq, hq, 16])?;
        cases.push(Case::new(
            "attention_backward",
            label,
            Precision::Accumulated,
            vec![q, k, v, grad],
            move |c, i| {
                let params = AttentionParams {
                    window,
                    ..AttentionParams::causal(16, 0)
                };
                let (dq, dk, dv) = c.attention_backward(&i[0], &i[1], &i[2], &params, &i[3])?;
                Ok(vec![dq, dk, dv])
            },
        ));
    }
    Ok(())
}
