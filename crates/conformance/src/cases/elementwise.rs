//! Unary, binary (broadcast and strided), scalar and in-place elementwise ops.

use tempra_tensor::{BinaryOp, UnaryOp};

use crate::budget::Precision;
use crate::case::{Case, Inputs};
use crate::error::Result;

/// Whether `op` is computed with one rounding (else it is approximated).
fn unary_precision(op: UnaryOp) -> Precision {
    use UnaryOp::*;
    match op {
        Neg | Abs | Relu => Precision::Exact,
        Sqr | Recip | Sqrt => Precision::Rounded,
        _ => Precision::Transcendental,
    }
}

/// Whether `op` needs positive inputs.
fn needs_positive(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Recip
    )
}

pub(super) fn push(cases: &mut Vec<Case>) -> Result<()> {
    let mut inputs = Inputs::new(0xE1E);
    for op in UnaryOp::ALL {
        // Contiguous inputs, then a transposed (strided) one.
        for (dims, transposed) in [
            (vec![3usize], false),
            (vec![257], false),
            (vec![17, 33], false),
            (vec![33, 17], true),
        ] {
            let low = if needs_positive(op) { 0.1 } else { -4.0 };
            let x = inputs.uniform(&dims, low, 4.0)?;
            let name = format!(
                "{} {dims:?}{}",
                op.name(),
                if transposed { "ᵀ" } else { "" }
            );
            cases.push(Case::new(
                "unary",
                name,
                unary_precision(op),
                vec![x],
                move |c, i| {
                    let x = if transposed { i[0].t()? } else { i[0].clone() };
                    Ok(vec![c.unary(op, &x)?])
                },
            ));
        }
    }

    for op in BinaryOp::ALL {
        let precision = match op {
            BinaryOp::Maximum | BinaryOp::Minimum => Precision::Exact,
            _ => Precision::Rounded,
        };
        // rhs away from zero so division stays well conditioned.
        let rhs = |inputs: &mut Inputs, dims: &[usize]| inputs.uniform(dims, 0.5, 2.0);
        let shapes: [(&str, Vec<usize>, Vec<usize>); 4] = [
            ("same [257]", vec![257], vec![257]),
            ("row broadcast [33, 17] ⊕ [17]", vec![33, 17], vec![17]),
            (
                "both broadcast [5, 1, 7] ⊕ [1, 3, 7]",
                vec![5, 1, 7],
                vec![1, 3, 7],
            ),
            (
                "column broadcast [17, 33] ⊕ [17, 1]",
                vec![17, 33],
                vec![17, 1],
            ),
        ];
        for (label, a_dims, b_dims) in shapes {
            let a = inputs.normal(&a_dims)?;
            let b = rhs(&mut inputs, &b_dims)?;
            let name = format!("{} {label}", op.name());
            cases.push(Case::new(
                "binary",
                name,
                precision,
                vec![a, b],
                move |c, i| Ok(vec![c.binary(op, &i[0], &i[1])?]),
            ));
        }
        let a = inputs.normal(&[17, 33])?;
        let b = rhs(&mut inputs, &[33, 17])?;
        let name = format!("{} [17, 33] ⊕ [33, 17]ᵀ", op.name());
        cases.push(Case::new(
            "binary",
            name,
            precision,
            vec![a, b],
            move |c, i| Ok(vec![c.binary(op, &i[0], &i[1].t()?)?]),
        ));
        let x = inputs.normal(&[3, 257])?;
        let name = format!("{} scalar [3, 257]", op.name());
        cases.push(Case::new(
            "binary_scalar",
            name,
            precision,
            vec![x],
            move |c, i| Ok(vec![c.binary_scalar(op, &i[0], 1.75)?]),
        ));
        let a = inputs.normal(&[33, 17])?;
        let b = rhs(&mut inputs, &[17])?;
        let name = format!("{} in place [33, 17] ⊕ [17]", op.name());
        cases.push(Case::new(
            "binary_inplace",
            name,
            precision,
            vec![a, b],
            move |c, i| {
                let a = c.add_scalar(&i[0], 0.0)?; // a fresh, uniquely held output
                Ok(vec![c.binary_inplace(op, a, &i[1])?])
            },
        ));
    }
    Ok(())
}
