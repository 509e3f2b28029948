//! reduce (sum, mean, max, min along one dim) and argmax on F32.
//!
//! Along a unit-stride last dim each output is one SIMD row reduction. Along any other
//! dim the output rows are accumulated slice by slice (`out op= x[.., k, ..]`), which
//! vectorises across the kept inner dims. Threads split the outputs, so the reduction
//! order, and the result, do not depend on the thread count.

use tempra_tensor::{BinaryOp, DType, Layout, ReduceOp, Result, Tensor};

use crate::kernels::elementwise::{self as ew, Operand};
use crate::kernels::reduce as kernels;
use crate::ops::{Exec, MIN_CHEAP, Outcome, gather, input, min_rows, output};
use crate::strided::Walk;

/// Values gathered per chunk for strided rows.
const CHUNK: usize = 256;

/// Reduces `x` along `dim` into `out` (`x`'s shape with `dim` = 1).
pub(crate) fn reduce(
    exec: &Exec<'_>,
    op: ReduceOp,
    x: &Tensor,
    dim: usize,
    out: &mut Tensor,
) -> Result<Outcome> {
    if x.dtype() != DType::F32 || dim >= x.rank() {
        return Ok(Outcome::Delegate);
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let n = x.dims()[dim];
    let kept = x.layout().select(dim, 0)?; // the other dims, at slice k = 0
    let stride = x.layout().strides()[dim];
    let inner: usize = x.dims()[dim + 1..].iter().product();
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let level = exec.level;
    if inner == 1 || n == 1 {
        // One row per output: `n` values `stride` apart.
        let starts = Walk::new([&kept]);
        let [ss] = starts.inner_strides();
        exec.workers
            .parallel_chunks_mut(y, 1, min_rows(n, MIN_CHEAP), |range, part| {
                let mut pos = 0;
                starts.for_each_run(range, |[o], len| {
                    for i in 0..len {
                        part[pos] = reduce_strided(level, op, xs, o + i * ss, stride, n);
                        pos += 1;
                    }
                });
            });
        return Ok(Outcome::Done);
    }
    // Slice by slice: y = x[k = 0], then y op= x[k] for every other k.
    let combine = match op {
        ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
        ReduceOp::Max => BinaryOp::Maximum,
        ReduceOp::Min => BinaryOp::Minimum,
    };
    exec.workers
        .parallel_chunks_mut(y, 1, min_rows(n, MIN_CHEAP), |range, part| {
            for k in 0..n {
                let slice = shifted(&kept, k * stride);
                let walk = Walk::new([&slice]);
                let [ss] = walk.inner_strides();
                let mut pos = 0;
                walk.for_each_run(range.clone(), |[o], len| {
                    let y = &mut part[pos..pos + len];
                    pos += len;
                    if k == 0 {
                        gather(xs, o, ss, y);
                        return;
                    }
                    match ss {
                        1 => ew::binary_inplace(level, combine, y, Operand::Row(&xs[o..o + len])),
                        0 => ew::binary_inplace(level, combine, y, Operand::Splat(xs[o])),
                        _ => {
                            let mut buf = [0f32; CHUNK];
                            for (c, yc) in y.chunks_mut(CHUNK).enumerate() {
                                let b = &mut buf[..yc.len()];
                                gather(xs, o + c * CHUNK * ss, ss, b);
                                ew::binary_inplace(level, combine, yc, Operand::Row(b));
                            }
                        }
                    }
                });
            }
            if op == ReduceOp::Mean {
                ew::binary_inplace(level, BinaryOp::Mul, part, Operand::Splat(1.0 / n as f32));
            }
        });
    Ok(Outcome::Done)
}

/// `layout` with its offset moved by `by` units.
fn shifted(layout: &Layout, by: usize) -> Layout {
    Layout::from_parts(
        *layout.shape(),
        layout.strides(),
        layout.offset() + by,
        layout.dtype(),
    )
    .unwrap_or(*layout)
}

/// `op` over `n` values of `xs` from `start`, `stride` apart.
fn reduce_strided(
    level: crate::isa::Level,
    op: ReduceOp,
    xs: &[f32],
    start: usize,
    stride: usize,
    n: usize,
) -> f32 {
    if stride == 1 || n == 1 {
        return kernels::reduce(level, op, &xs[start..start + n]);
    }
    let part_op = if op == ReduceOp::Mean {
        ReduceOp::Sum
    } else {
        op
    };
    let mut buf = [0f32; CHUNK];
    let mut acc: Option<f32> = None;
    for c in (0..n).step_by(CHUNK) {
        let m = CHUNK.min(n - c);
        gather(xs, start + c * stride, stride, &mut buf[..m]);
        let v = kernels::reduce(level, part_op, &buf[..m]);
        acc = Some(match (acc, part_op) {
            (None, _) => v,
            (Some(a), ReduceOp::Max) => nan_max(a, v),
            (Some(a), ReduceOp::Min) => -nan_max(-a, -v),
            (Some(a), _) => a + v,
        });
    }
    let total = acc.unwrap_or(0.0);
    if op == ReduceOp::Mean {
        total / n as f32
    } else {
        total
    }
}

/// max that propagates NaN.
fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.max(b)
    }
}

/// The index of the first maximum along `dim` (a NaN counts as the maximum) into U32
/// `out`.
pub(crate) fn argmax(exec: &Exec<'_>, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<Outcome> {
    if x.dtype() != DType::F32 || dim >= x.rank() || x.dims()[dim] == 0 {
        return Ok(Outcome::Delegate);
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let n = x.dims()[dim];
    let stride = x.layout().strides()[dim];
    let starts = Walk::new([&x.layout().select(dim, 0)?]);
    let [ss] = starts.inner_strides();
    let Some(y) = output::<u32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let level = exec.level;
    exec.workers
        .parallel_chunks_mut(y, 1, min_rows(n, MIN_CHEAP), |range, part| {
            let mut pos = 0;
            starts.for_each_run(range, |[o], len| {
                for i in 0..len {
                    let start = o + i * ss;
                    let best = if stride == 1 || n == 1 {
                        kernels::argmax(level, &xs[start..start + n])
                    } else {
                        argmax_strided(xs, start, stride, n)
                    };
                    part[pos] = best as u32;
                    pos += 1;
                }
            });
        });
    Ok(Outcome::Done)
}

/// The reference's argmax over `n` strided values.
fn argmax_strided(xs: &[f32], start: usize, stride: usize, n: usize) -> usize {
    let mut best = 0;
    let mut best_value = xs[start];
    for k in 1..n {
        let v = xs[start + k * stride];
        if !best_value.is_nan() && (v > best_value || v.is_nan()) {
            best = k;
            best_value = v;
        }
    }
    best
}
