//! `gradcheck`: compares every analytic gradient of a function against central finite
//! differences, in F64 (the reference backend supports it for every op).

use tempra_tensor::{DType, Tensor};

use crate::autograd::Autograd;
use crate::error::{AutogradError, Result};
use crate::grad_mode::no_grad;
use crate::var::Var;

/// Settings of [`gradcheck`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradcheckOptions {
    /// The finite-difference step `h` (each element is evaluated at `x ± h`).
    pub step: f64,
    /// Relative tolerance against the numeric gradient.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Seed of the random projection that turns a tensor output into a scalar.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        Self {
            step: 1e-6,
            rtol: 1e-5,
            atol: 1e-7,
            seed: 0x5eed,
        }
    }
}

/// What a passing [`gradcheck`] compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradcheckReport {
    /// Gradient elements compared.
    pub checked: usize,
    /// The largest `|analytic − numeric|`.
    pub max_abs_error: f64,
}

/// The scalar `Σ f(inputs) ⊙ r` for a fixed random `r`, so every output element (and so
/// every path of the backward) is weighted.
fn projected<F>(
    ag: &Autograd,
    f: &F,
    inputs: &[Var],
    projection: &mut Option<Tensor>,
    seed: u64,
) -> Result<Var>
where
    F: Fn(&Autograd, &[Var]) -> Result<Var>,
{
    let out = f(ag, inputs)?;
    let r = match projection {
        Some(r) => r.clone(),
        None => {
            let r = ag.ctx().randn(out.dims(), out.dtype(), 0.0, 1.0, seed)?;
            *projection = Some(r.clone());
            r
        }
    };
    ag.sum_all(&ag.mul(&out, &Var::constant(r))?)
}

fn scalar_value(v: &Var) -> Result<f64> {
    Ok(v.tensor()
        .to_vec_f64()?
        .first()
        .copied()
        .unwrap_or(f64::NAN))
}

/// Checks the gradients of `f` with respect to each of `inputs` (F64 tensors) against
/// central differences `(L(x+h) − L(x−h)) / 2h` of `L = Σ f(x) ⊙ r` for a fixed random
/// `r`. An element passes when `|analytic − numeric| ≤ atol + rtol·|numeric|`; the first
/// that fails is an [`AutogradError::Gradcheck`] naming it.
///
/// `f` receives the inputs as variables, in order; non-differentiable arguments (ids,
/// positions, targets) are captured by the closure. To check an op on strided inputs,
/// have `f` transpose or narrow its variables before the op.
///
/// ```
/// use tempra_autograd::{Autograd, gradcheck::{gradcheck, GradcheckOptions}};
/// use tempra_tensor::{DType, ExecContext};
///
/// let ag = Autograd::new(ExecContext::reference());
/// let x = ag.ctx().randn(&[3, 4], DType::F64, 0.0, 1.0, 1)?;
/// let report = gradcheck(&ag, &[x], |ag, v| ag.softmax(&v[0]), &GradcheckOptions::default())?;
/// assert_eq!(report.checked, 12);
/// # Ok::<(), tempra_autograd::AutogradError>(())
/// ```
pub fn gradcheck<F>(
    ag: &Autograd,
    inputs: &[Tensor],
    f: F,
    options: &GradcheckOptions,
) -> Result<GradcheckReport>
where
    F: Fn(&Autograd, &[Var]) -> Result<Var>,
{
    for (i, t) in inputs.iter().enumerate() {
        if t.dtype() != DType::F64 {
            return Err(AutogradError::Argument {
                op: "gradcheck",
                name: "inputs",
                reason: format!("input {i} is {}; finite differences need f64", t.dtype()),
            });
        }
    }
    let mut projection = None;
    let vars: Vec<Var> = inputs.iter().map(|t| Var::variable(t.clone())).collect();
    let loss = projected(ag, &f, &vars, &mut projection, options.seed)?;
    let grads = ag.backward(&loss)?;
    drop(loss);
    let analytic: Vec<Vec<f64>> = vars
        .iter()
        .map(|v| match grads.get(v) {
            Some(g) => g.to_vec_f64(),
            None => Ok(vec![0.0; v.elem_count()]),
        })
        .collect::<Result<_, _>>()?;
    drop(grads);

    let _guard = no_grad();
    let mut report = GradcheckReport {
        checked: 0,
        max_abs_error: 0.0,
    };
    let mut constants: Vec<Var> = inputs.iter().map(|t| Var::constant(t.clone())).collect();
    for (i, input) in inputs.iter().enumerate() {
        let mut values = input.to_vec_f64()?;
        for j in 0..values.len() {
            let original = values[j];
            let mut eval = |x: f64| -> Result<f64> {
                values[j] = x;
                constants[i] = Var::constant(ag.ctx().from_slice(&values, input.dims())?);
                scalar_value(&projected(
                    ag,
                    &f,
                    &constants,
                    &mut projection,
                    options.seed,
                )?)
            };
            let plus = eval(original + options.step)?;
            let minus = eval(original - options.step)?;
            values[j] = original;
            let numeric = (plus - minus) / (2.0 * options.step);
            let a = analytic[i][j];
            let abs_error = (a - numeric).abs();
            let within = abs_error <= options.atol + options.rtol * numeric.abs();
            if !within {
                return Err(AutogradError::Gradcheck {
                    input: i,
                    index: j,
                    analytic: a,
                    numeric,
                    abs_error,
                });
            }
            report.checked += 1;
            report.max_abs_error = report.max_abs_error.max(abs_error);
        }
        constants[i] = Var::constant(input.clone());
    }
    Ok(report)
}
