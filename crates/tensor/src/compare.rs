//! The one error metric every cross-backend comparison uses: the normalized mean squared
//! error of ggml's `test-backend-ops`, `Σ(got − want)² / Σ want²`, computed in f64.
//!
//! NaNs must sit at the same positions on both sides and infinities must be equal (a
//! kernel that produces a NaN where the reference has a number is wrong at any budget);
//! those elements are then left out of the sums. When every reference value is zero the
//! metric is the plain sum of squared errors. Budgets stated in this metric live where the
//! comparisons are made (the conformance suite's per-format table, the engines' tests).

use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// `Σ(got − want)² / Σ want²` over the elements of two tensors of the same shape (any
/// layout, any plain or block dtype, on any device: values are read back as f64).
///
/// ```
/// use tempra_tensor::{ExecContext, compare::nmse};
///
/// let ctx = ExecContext::reference();
/// let want = ctx.from_slice(&[1.0f32, 2.0, 2.0], &[3])?;
/// let got = ctx.from_slice(&[1.0f32, 2.0, 3.0], &[3])?;
/// assert_eq!(nmse(&got, &want)?, 1.0 / 9.0);
/// # Ok::<(), tempra_tensor::TensorError>(())
/// ```
pub fn nmse(got: &Tensor, want: &Tensor) -> Result<f64> {
    if got.dims() != want.dims() {
        return Err(TensorError::Argument {
            op: "nmse",
            name: "got",
            reason: format!(
                "shape {:?}, the reference's is {:?}",
                got.dims(),
                want.dims()
            ),
        });
    }
    nmse_values(&got.to_vec_f64()?, &want.to_vec_f64()?)
}

/// [`nmse`] over two slices of the same length (f64 values, or anything that converts
/// to them exactly, through [`nmse_f32`]).
pub fn nmse_values(got: &[f64], want: &[f64]) -> Result<f64> {
    if got.len() != want.len() {
        return Err(TensorError::Argument {
            op: "nmse",
            name: "got",
            reason: format!("{} values, the reference has {}", got.len(), want.len()),
        });
    }
    let (mut err, mut norm) = (0f64, 0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || w.is_nan() || g.is_infinite() || w.is_infinite() {
            let same = (g.is_nan() && w.is_nan()) || g == w;
            if !same {
                return Err(TensorError::Argument {
                    op: "nmse",
                    name: "got",
                    reason: format!("element {i} is {g}, the reference's is {w}"),
                });
            }
            continue;
        }
        err += (g - w) * (g - w);
        norm += w * w;
    }
    Ok(if norm == 0.0 { err } else { err / norm })
}

/// [`nmse_values`] over f32 slices (widened exactly).
pub fn nmse_f32(got: &[f32], want: &[f32]) -> Result<f64> {
    let widen = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    nmse_values(&widen(got), &widen(want))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_have_zero_error_and_nans_must_line_up() {
        assert_eq!(
            nmse_values(&[1.0, f64::NAN], &[1.0, f64::NAN]).unwrap(),
            0.0
        );
        assert!(nmse_values(&[1.0, 0.0], &[1.0, f64::NAN]).is_err());
        assert!(nmse_values(&[f64::INFINITY], &[f64::NEG_INFINITY]).is_err());
        assert!(nmse_values(&[1.0], &[1.0, 2.0]).is_err());
    }

    #[test]
    fn all_zero_reference_gives_the_squared_error() {
        assert_eq!(nmse_values(&[0.5, 0.0], &[0.0, 0.0]).unwrap(), 0.25);
        assert_eq!(nmse_f32(&[3.0], &[2.0]).unwrap(), 0.25);
    }
}
