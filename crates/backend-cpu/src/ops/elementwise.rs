//! unary, binary (broadcasting), binary_inplace and binary_scalar on F32.
//!
//! The output is contiguous, so threads split its flat element range; inputs are walked
//! jointly in runs. A run whose inputs have stride 1 or 0 (a broadcast row or a
//! broadcast scalar) goes straight to the SIMD row kernels; other strides are gathered
//! into a stack buffer a chunk at a time.

use tempra_tensor::{BinaryOp, DType, Result, Tensor, UnaryOp};

use crate::isa::Level;
use crate::kernels::elementwise::{self as kernels, Operand};
use crate::ops::{Exec, MIN_CHEAP, MIN_HEAVY, Outcome, gather, input, output};
use crate::strided::Walk;

/// Values gathered per chunk for strided operands.
const CHUNK: usize = 256;

/// Elements per task for `op`.
fn min_elems_unary(op: UnaryOp) -> usize {
    match op {
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqr | UnaryOp::Relu => MIN_CHEAP,
        _ => MIN_HEAVY,
    }
}

/// `out = op(x)`.
pub(crate) fn unary(exec: &Exec<'_>, op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<Outcome> {
    if x.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let walk = Walk::new([x.layout()]);
    let [stride] = walk.inner_strides();
    let level = exec.level;
    exec.workers
        .parallel_chunks_mut(y, 1, min_elems_unary(op), |range, part| {
            let mut pos = 0;
            walk.for_each_run(range, |[o], len| {
                let y = &mut part[pos..pos + len];
                pos += len;
                match stride {
                    1 => kernels::unary(level, op, &xs[o..o + len], y),
                    0 => {
                        kernels::unary(level, op, &xs[o..o + 1], &mut y[..1]);
                        let v = y[0];
                        y.fill(v);
                    }
                    _ => {
                        gather(xs, o, stride, y);
                        kernels::unary_inplace(level, op, y);
                    }
                }
            });
        });
    Ok(Outcome::Done)
}

/// `out = op(a, b)` with `a` and `b` broadcast to `out`'s shape.
pub(crate) fn binary(
    exec: &Exec<'_>,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    out: &mut Tensor,
) -> Result<Outcome> {
    if a.dtype() != DType::F32 || b.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let (Some(xa), Some(xb)) = (input::<f32>(a), input::<f32>(b)) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let walk = Walk::new([a.layout(), b.layout()]);
    let [sa, sb] = walk.inner_strides();
    let level = exec.level;
    exec.workers
        .parallel_chunks_mut(y, 1, MIN_CHEAP, |range, part| {
            let mut pos = 0;
            walk.for_each_run(range, |[oa, ob], len| {
                binary_run(
                    level,
                    op,
                    (xa, oa, sa),
                    (xb, ob, sb),
                    &mut part[pos..pos + len],
                );
                pos += len;
            });
        });
    Ok(Outcome::Done)
}

/// `lhs_out = op(lhs_out, rhs)`; `lhs_out` is contiguous.
pub(crate) fn binary_inplace(
    exec: &Exec<'_>,
    op: BinaryOp,
    lhs_out: &mut Tensor,
    rhs: &Tensor,
) -> Result<Outcome> {
    if lhs_out.dtype() != DType::F32 || rhs.dtype() != DType::F32 || lhs_out.same_storage(rhs) {
        return Ok(Outcome::Delegate);
    }
    let Some(xb) = input::<f32>(rhs) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(lhs_out) else {
        return Ok(Outcome::Delegate);
    };
    let walk = Walk::new([rhs.layout()]);
    let [sb] = walk.inner_strides();
    let level = exec.level;
    exec.workers
        .parallel_chunks_mut(y, 1, MIN_CHEAP, |range, part| {
            let mut pos = 0;
            walk.for_each_run(range, |[ob], len| {
                let y = &mut part[pos..pos + len];
                pos += len;
                match sb {
                    1 => kernels::binary_inplace(level, op, y, Operand::Row(&xb[ob..ob + len])),
                    0 => kernels::binary_inplace(level, op, y, Operand::Splat(xb[ob])),
                    _ => {
                        let mut buf = [0f32; CHUNK];
                        for (k, yc) in y.chunks_mut(CHUNK).enumerate() {
                            let b = &mut buf[..yc.len()];
                            gather(xb, ob + k * CHUNK * sb, sb, b);
                            kernels::binary_inplace(level, op, yc, Operand::Row(b));
                        }
                    }
                }
            });
        });
    Ok(Outcome::Done)
}

/// `out = op(x, scalar)`.
pub(crate) fn binary_scalar(
    exec: &Exec<'_>,
    op: BinaryOp,
    x: &Tensor,
    scalar: f64,
    out: &mut Tensor,
) -> Result<Outcome> {
    if x.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let walk = Walk::new([x.layout()]);
    let [sx] = walk.inner_strides();
    let level = exec.level;
    let splat = [scalar as f32];
    exec.workers
        .parallel_chunks_mut(y, 1, MIN_CHEAP, |range, part| {
            let mut pos = 0;
            walk.for_each_run(range, |[o], len| {
                binary_run(
                    level,
                    op,
                    (xs, o, sx),
                    (&splat, 0, 0),
                    &mut part[pos..pos + len],
                );
                pos += len;
            });
        });
    Ok(Outcome::Done)
}

/// One strided operand run: storage, first unit, stride.
type Run<'a> = (&'a [f32], usize, usize);

/// The run as a kernel operand when its stride is 1 or 0.
#[inline]
fn direct(run: Run<'_>, len: usize) -> Option<Operand<'_>> {
    let (data, o, s) = run;
    match s {
        1 => Some(Operand::Row(&data[o..o + len])),
        0 => Some(Operand::Splat(data[o])),
        _ => None,
    }
}

/// `y = op(a, b)` over one run of `y.len()` elements.
#[inline]
fn binary_run(level: Level, op: BinaryOp, a: Run<'_>, b: Run<'_>, y: &mut [f32]) {
    let len = y.len();
    if let (Some(oa), Some(ob)) = (direct(a, len), direct(b, len)) {
        return kernels::binary(level, op, oa, ob, y);
    }
    // A strided operand: gather both into stack chunks.
    let (mut ba, mut bb) = ([0f32; CHUNK], [0f32; CHUNK]);
    for (k, yc) in y.chunks_mut(CHUNK).enumerate() {
        let n = yc.len();
        let start = k * CHUNK;
        let pick = |(data, o, s): Run<'_>, buf: &mut [f32; CHUNK]| -> usize {
            match s {
                0 => 0,
                _ => {
                    gather(data, o + start * s, s, &mut buf[..n]);
                    1
                }
            }
        };
        let (ka, kb) = (pick(a, &mut ba), pick(b, &mut bb));
        let oa = if ka == 0 {
            Operand::Splat(a.0[a.1])
        } else {
            Operand::Row(&ba[..n])
        };
        let ob = if kb == 0 {
            Operand::Splat(b.0[b.1])
        } else {
            Operand::Row(&bb[..n])
        };
        kernels::binary(level, op, oa, ob, yc);
    }
}
