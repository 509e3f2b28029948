//! softmax and log_softmax along the last dim, F32.

use tempra_tensor::{DType, Result, Tensor};

use crate::kernels::softmax as kernels;
use crate::ops::{Exec, MIN_HEAVY, Outcome, input, map_rows, min_rows, output};

/// Softmax (log-softmax when `log`) of every row of the last dim.
pub(crate) fn softmax(exec: &Exec<'_>, x: &Tensor, log: bool, out: &mut Tensor) -> Result<Outcome> {
    if x.dtype() != DType::F32 || x.rank() == 0 {
        return Ok(Outcome::Delegate);
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let level = exec.level;
    let d = x.shape().last();
    let op = if log { "log_softmax" } else { "softmax" };
    map_rows(
        exec,
        op,
        xs,
        x.layout(),
        y,
        min_rows(d, MIN_HEAVY),
        |row, y| kernels::softmax(level, row, log, y),
    )?;
    Ok(Outcome::Done)
}
