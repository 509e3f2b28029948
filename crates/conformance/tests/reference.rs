//! The reference backend's own f32 kernels against the f64 oracle: every case within its
//! budget, nothing handed on; and the suite's checks can fail.

use tempra_conformance::case::{Case, Inputs};
use tempra_conformance::{Outcome, Precision, backends, cases, run_suite};
use tempra_tensor::BinaryOp;

#[test]
fn the_reference_meets_every_budget() {
    let cases = cases::all().unwrap();
    let target = backends::reference();
    let report = run_suite(&target.ctx, target.label, &cases).unwrap();
    println!("{report}");
    assert!(report.failures().is_empty(), "{report}");
    assert!(report.handoffs().is_empty(), "{report}");
    // Every op family of the seam is in the list.
    let families: std::collections::BTreeSet<_> = cases.iter().map(|c| c.family).collect();
    for family in [
        "unary",
        "binary",
        "binary_scalar",
        "binary_inplace",
        "reduce",
        "argmax",
        "softmax",
        "log_softmax",
        "matmul",
        "linear",
        "rms_norm",
        "layer_norm",
        "rope",
        "embedding",
        "attention",
        "copy",
        "quantize",
        "cross_entropy",
        "cross_entropy_backward",
        "embedding_backward",
        "one_hot",
        "attention_backward",
    ] {
        assert!(families.contains(family), "no {family} case");
    }
}

#[test]
fn a_result_off_by_one_part_in_a_thousand_fails_an_accumulated_budget() {
    let mut inputs = Inputs::new(1);
    let x = inputs.normal(&[4, 33]).unwrap();
    // Right on the oracle (f64 inputs), off by 1e-3 elsewhere: a wrong kernel.
    let case = Case::new(
        "binary_scalar",
        "perturbed",
        Precision::Accumulated,
        vec![x],
        |c, i| {
            let scale = if i[0].dtype() == tempra_tensor::DType::F64 {
                1.0
            } else {
                1.001
            };
            Ok(vec![c.binary_scalar(BinaryOp::Mul, &i[0], scale)?])
        },
    );
    let target = backends::reference();
    let report = run_suite(&target.ctx, target.label, &[case]).unwrap();
    let row = &report.rows[0];
    assert_eq!(row.outcome, Outcome::OverBudget, "{report}");
    assert!(row.error.unwrap() > 1e-7, "{report}");
}

#[test]
fn a_nan_where_the_oracle_has_a_number_is_an_error() {
    let x = tempra_tensor::Tensor::owned_from_slice(&[1.0f32, -1.0], &[2]).unwrap();
    let case = Case::new(
        "unary",
        "sqrt of a negative",
        Precision::Rounded,
        vec![x],
        |c, i| {
            let v = if i[0].dtype() == tempra_tensor::DType::F64 {
                c.unary(tempra_tensor::UnaryOp::Abs, &i[0])?
            } else {
                c.unary(tempra_tensor::UnaryOp::Sqrt, &i[0])?
            };
            Ok(vec![v])
        },
    );
    let target = backends::reference();
    let report = run_suite(&target.ctx, target.label, &[case]).unwrap();
    assert!(
        matches!(report.rows[0].outcome, Outcome::Error(_)),
        "{report}"
    );
}
