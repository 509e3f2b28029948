//! Running the suite on one backend: each case's inputs are uploaded to the context
//! under test, the op runs there, and its outputs are compared with the f64 oracle in the
//! one metric, while the backend's hand-offs during the op are counted.
//!
//! The oracle is the reference backend run on the case's inputs widened to f64 (float
//! formats exactly, block formats dequantized), so every backend, the reference's own
//! f32 kernels included, is measured against the same exact-arithmetic result.

use tempra_tensor::handoff::handoffs_since;
use tempra_tensor::{DType, ExecContext, Tensor};

use crate::case::Case;
use crate::error::Result;
use crate::report::{Outcome, Report, Row};

/// `t` (a contiguous host tensor) with its values widened to f64; ids and f64 data as
/// they are.
fn widen(t: &Tensor) -> Result<Tensor> {
    match t.dtype() {
        DType::F64 | DType::U32 | DType::I32 | DType::U8 => Ok(t.clone()),
        _ => Ok(Tensor::owned_from_slice(&t.to_vec_f64()?, t.dims())?),
    }
}

/// `t`'s bytes as a tensor of `ctx` (a device upload for a GPU context).
fn upload(ctx: &ExecContext, t: &Tensor) -> Result<Tensor> {
    let bytes = &t.storage().host_bytes()?[..t.layout().bytes_spanned()];
    Ok(ctx.from_bytes(bytes, t.dims(), t.dtype())?)
}

/// The f64 oracle of `case`: `reference` (a reference-backend context) on its widened
/// inputs.
pub fn oracle(reference: &ExecContext, case: &Case) -> Result<Vec<Tensor>> {
    let inputs = case
        .inputs
        .iter()
        .enumerate()
        .map(|(n, t)| {
            if case.kept.contains(&n) {
                Ok(t.clone())
            } else {
                widen(t)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((case.op)(reference, &inputs)?)
}

/// Runs `case` on `ctx` against `want` (its [`oracle`]).
pub fn run_case(ctx: &ExecContext, case: &Case, want: &[Tensor]) -> Row {
    let budget = case.precision.budget();
    let mut row = Row {
        case: case.id(),
        family: case.family,
        precision: case.precision,
        budget,
        error: None,
        handoffs: Default::default(),
        outcome: Outcome::Pass,
    };
    let inputs = match case
        .inputs
        .iter()
        .map(|t| upload(ctx, t))
        .collect::<Result<Vec<_>>>()
    {
        Ok(inputs) => inputs,
        Err(e) => {
            row.outcome = Outcome::Error(format!("uploading the inputs: {e}"));
            return row;
        }
    };
    let before = ctx.handoffs();
    let got = (case.op)(ctx, &inputs);
    row.handoffs = handoffs_since(&before, &ctx.handoffs());
    let got = match got {
        Ok(got) => got,
        Err(e) => {
            row.outcome = Outcome::Error(e.to_string());
            return row;
        }
    };
    if got.len() != want.len() {
        row.outcome = Outcome::Error(format!(
            "{} outputs, the oracle has {}",
            got.len(),
            want.len()
        ));
        return row;
    }
    let mut worst = 0f64;
    for (n, (g, w)) in got.iter().zip(want).enumerate() {
        match tempra_tensor::compare::nmse(g, w) {
            Ok(e) => worst = worst.max(e),
            Err(e) => {
                row.outcome = Outcome::Error(format!("output {n}: {e}"));
                return row;
            }
        }
    }
    row.error = Some(worst);
    if worst > budget {
        row.outcome = Outcome::OverBudget;
    }
    row
}

/// Runs every case of `cases` on `ctx` (named `backend` in the report).
pub fn run_suite(ctx: &ExecContext, backend: impl Into<String>, cases: &[Case]) -> Result<Report> {
    let reference = ExecContext::reference();
    let mut rows = Vec::with_capacity(cases.len());
    for case in cases {
        let want = oracle(&reference, case)?;
        rows.push(run_case(ctx, case, &want));
    }
    Ok(Report::new(backend.into(), ctx.backend().name(), rows))
}
