//! Reductions over any dim (contiguous and strided), argmax, softmax and log-softmax.

use tempra_tensor::ReduceOp;

use crate::budget::Precision;
use crate::case::{Case, Inputs};
use crate::error::Result;

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0x5ED);
    for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
        let precision = match op {
            ReduceOp::Max | ReduceOp::Min => Precision::Exact,
            _ => Precision::Accumulated,
        };
        for (dims, dim) in [
            (vec![257usize], 0usize),
            (vec![17, 33], 1),
            (vec![17, 33], 0),
            (vec![3, 5, 7], 1),
        ] {
            let x = inputs.normal(&dims)?;
            let name = format!("{} {dims:?} dim {dim}", op.name());
            cases.push(Case::new(
                "reduce",
                name,
                precision,
                vec![x],
                move |c, i| Ok(vec![c.reduce(op, &i[0], dim, false)?]),
            ));
        }
        let x = inputs.normal(&[33, 17])?;
        let name = format!("{} [33, 17]ᵀ dim 1", op.name());
        cases.push(Case::new(
            "reduce",
            name,
            precision,
            vec![x],
            move |c, i| Ok(vec![c.reduce(op, &i[0].t()?, 1, true)?]),
        ));
    }
    for (dims, dim) in [
        (vec![17usize, 33], 1usize),
        (vec![5, 257], 1),
        (vec![17, 33], 0),
    ] {
        let x = inputs.normal(&dims)?;
        let name = format!("{dims:?} dim {dim}");
        cases.push(Case::new(
            "argmax",
            name,
            Precision::Exact,
            vec![x],
            move |c, i| Ok(vec![c.argmax(&i[0], dim, false)?]),
        ));
    }
    for log in [false, true] {
        let family = if log { "log_softmax" } else { "softmax" };
        for dims in [vec![1usize, 3], vec![17, 33], vec![3, 1000]] {
            let x = inputs.uniform(&dims, -8.0, 8.0)?;
            cases.push(Case::new(
                family,
                format!("{dims:?}"),
                Precision::Accumulated,
                vec![x],
                move |c, i| {
                    Ok(vec![if log {
                        c.log_softmax(&i[0])?
                    } else {
                        c.softmax(&i[0])?
                    }])
                },
            ));
        }
        let x = inputs.normal(&[33, 17])?;
        cases.push(Case::new(
            family,
            "[33, 17]ᵀ",
            Precision::Accumulated,
            vec![x],
            move |c, i| {
                let x = i[0].t()?;
                Ok(vec![if log {
                    c.log_softmax(&x)?
                } else {
                    c.softmax(&x)?
                }])
            },
        ));
    }
    Ok(())
}
