//! rms_norm and layer_norm along the last dim: F32 input, F32/F16/BF16/F64 parameters
//! (converted once per call to f32 when they are not contiguous F32).

use tempra_tensor::{DType, Result, Tensor};

use crate::kernels::norm as kernels;
use crate::ops::{Exec, MIN_CHEAP, Outcome, input, map_rows, min_rows, output, param_f32};

/// `out = x / √(mean(x²) + eps) · w` per row.
pub(crate) fn rms_norm(
    exec: &Exec<'_>,
    x: &Tensor,
    w: &Tensor,
    eps: f64,
    out: &mut Tensor,
) -> Result<Outcome> {
    if x.dtype() != DType::F32 || x.rank() == 0 {
        return Ok(Outcome::Delegate);
    }
    let mut scratch = None;
    let Some(w) = param_f32(exec, "rms_norm", w, &mut scratch)? else {
        return Ok(Outcome::Delegate);
    };
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let level = exec.level;
    let d = x.shape().last();
    map_rows(
        exec,
        "rms_norm",
        xs,
        x.layout(),
        y,
        min_rows(d, MIN_CHEAP),
        |row, y| kernels::rms_norm(level, row, w, eps, y),
    )?;
    Ok(Outcome::Done)
}

/// `out = (x - mean) / √(var + eps) · w (+ b)` per row.
pub(crate) fn layer_norm(
    exec: &Exec<'_>,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    eps: f64,
    out: &mut Tensor,
) -> Result<Outcome> {
    if x.dtype() != DType::F32 || x.rank() == 0 {
        return Ok(Outcome::Delegate);
    }
    let (mut w_scratch, mut b_scratch) = (None, None);
    let Some(w) = param_f32(exec, "layer_norm", w, &mut w_scratch)? else {
        return Ok(Outcome::Delegate);
    };
    let b = match b {
        Some(b) => match param_f32(exec, "layer_norm", b, &mut b_scratch)? {
            Some(b) => Some(b),
            None => return Ok(Outcome::Delegate),
        },
        None => None,
    };
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let level = exec.level;
    let d = x.shape().last();
    map_rows(
        exec,
        "layer_norm",
        xs,
        x.layout(),
        y,
        min_rows(d, MIN_CHEAP),
        |row, y| kernels::layer_norm(level, row, w, b, eps, y),
    )?;
    Ok(Outcome::Done)
}
