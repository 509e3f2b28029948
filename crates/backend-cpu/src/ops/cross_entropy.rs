//! Cross-entropy (fused log-softmax + NLL) and its logits gradient for contiguous F32
//! logits `[rows, V]` and U32 targets: the loss of language-model training.
//!
//! Rows are split between threads; each row is two passes (max, then the sum of
//! exponentials) for the loss, and one more (the probabilities) for the gradient.

use tempra_tensor::{DType, Result, Tensor, TensorError};

use crate::ops::{Exec, MIN_HEAVY, Outcome, input, min_rows, output};

/// The rows of a contiguous (offset-0 or not) tensor as a slice, or `None`.
fn contiguous<T: bytemuck::Pod>(t: &Tensor) -> Option<&[T]> {
    if !t.layout().is_contiguous() {
        return None;
    }
    input::<T>(t)?.get(t.layout().offset()..t.layout().offset() + t.elem_count())
}

/// `log Σ exp(row)`.
fn logsumexp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = row.iter().map(|&x| (x - max).exp()).sum();
    max + sum.ln()
}

fn bad_target(op: &'static str, id: u32, row: usize, v: usize) -> TensorError {
    TensorError::Argument {
        op,
        name: "ids",
        reason: format!("id {id} at position {row} is out of range for {v}"),
    }
}

/// The targets as u32, checked against the vocabulary: `Err` names the first bad one.
fn checked_targets<'a>(
    op: &'static str,
    targets: &'a Tensor,
    v: usize,
    ignore_index: Option<u32>,
) -> Result<Option<&'a [u32]>> {
    if targets.dtype() != DType::U32 {
        return Ok(None);
    }
    let Some(t) = contiguous::<u32>(targets) else {
        return Ok(None);
    };
    if let Some((row, &id)) = t
        .iter()
        .enumerate()
        .find(|&(_, &id)| Some(id) != ignore_index && id as usize >= v)
    {
        return Err(bad_target(op, id, row, v));
    }
    Ok(Some(t))
}

/// Per-row loss `logsumexp(row) − row[target]` (0 for ignored rows) into `out [rows]`.
pub(crate) fn cross_entropy(
    exec: &Exec<'_>,
    logits: &Tensor,
    targets: &Tensor,
    ignore_index: Option<u32>,
    out: &mut Tensor,
) -> Result<Outcome> {
    if logits.dtype() != DType::F32 || out.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let v = logits.shape().last();
    let Some(x) = contiguous::<f32>(logits) else {
        return Ok(Outcome::Delegate);
    };
    let Some(t) = checked_targets("cross_entropy", targets, v, ignore_index)? else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if y.len() != t.len() || v == 0 {
        return Ok(Outcome::Delegate);
    }
    exec.workers
        .parallel_chunks_mut(y, 1, min_rows(v, MIN_HEAVY), |rows, part| {
            for (row, slot) in rows.zip(part.iter_mut()) {
                let target = t[row];
                *slot = if Some(target) == ignore_index {
                    0.0
                } else {
                    let xs = &x[row * v..(row + 1) * v];
                    logsumexp(xs) - xs[target as usize]
                };
            }
        });
    Ok(Outcome::Done)
}

/// `out [rows, V] = (softmax(row) − onehot(target))·grad[row]` (0 for ignored rows).
pub(crate) fn cross_entropy_backward(
    exec: &Exec<'_>,
    logits: &Tensor,
    targets: &Tensor,
    ignore_index: Option<u32>,
    grad: &Tensor,
    out: &mut Tensor,
) -> Result<Outcome> {
    if logits.dtype() != DType::F32 || out.dtype() != DType::F32 || grad.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let v = logits.shape().last();
    let (Some(x), Some(g)) = (contiguous::<f32>(logits), contiguous::<f32>(grad)) else {
        return Ok(Outcome::Delegate);
    };
    let Some(t) = checked_targets("cross_entropy_backward", targets, v, ignore_index)? else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if v == 0 || y.len() != t.len() * v || g.len() != t.len() {
        return Ok(Outcome::Delegate);
    }
    exec.workers
        .parallel_chunks_mut(y, v, min_rows(v, MIN_HEAVY), |rows, part| {
            for (row, dst) in rows.zip(part.chunks_mut(v)) {
                let target = t[row];
                if Some(target) == ignore_index {
                    dst.fill(0.0);
                    continue;
                }
                let xs = &x[row * v..(row + 1) * v];
                let lse = logsumexp(xs);
                let scale = g[row];
                for (d, &xv) in dst.iter_mut().zip(xs) {
                    *d = (xv - lse).exp() * scale;
                }
                dst[target as usize] -= scale;
            }
        });
    Ok(Outcome::Done)
}
