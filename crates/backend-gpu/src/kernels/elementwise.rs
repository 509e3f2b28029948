//! Unary, binary (broadcasting through stride-0 views), scalar and in-place elementwise
//! ops on f32. Dense operands larger than one binding are processed in element ranges,
//! one window each.

use std::sync::Arc;

use tempra_tensor::{BinaryOp, Tensor, UnaryOp};

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::kernels::compose;
use crate::operand::Operand;
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};
use crate::window::BufferWindow;

const WORKGROUP: usize = 256;

fn source(f16: bool) -> String {
    compose(f16, &[include_str!("elementwise.wgsl")])
}

const fn spec(entry: &'static str) -> KernelSpec {
    KernelSpec {
        name: "elementwise",
        entry,
        bindings: &[Access::Read, Access::Read, Access::ReadWrite],
        source,
        f16: false,
    }
}

/// The shader's code for a unary op.
fn unary_code(op: UnaryOp) -> u32 {
    match op {
        UnaryOp::Neg => 0,
        UnaryOp::Abs => 1,
        UnaryOp::Sqr => 2,
        UnaryOp::Recip => 3,
        UnaryOp::Exp => 4,
        UnaryOp::Log => 5,
        UnaryOp::Sqrt => 6,
        UnaryOp::Rsqrt => 7,
        UnaryOp::Tanh => 8,
        UnaryOp::Sigmoid => 9,
        UnaryOp::Relu => 10,
        UnaryOp::Silu => 11,
        UnaryOp::GeluTanh => 12,
        UnaryOp::GeluErf => 13,
    }
}

/// The shader's code for a binary op.
fn binary_code(op: BinaryOp) -> u32 {
    match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Maximum => 4,
        BinaryOp::Minimum => 5,
    }
}

/// `out = op(x)`.
pub(crate) fn unary(ctx: &Arc<DeviceContext>, op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
    let x = ctx.operand(x)?;
    let o = ctx.output("unary", out)?;
    run(ctx, &spec("unary"), unary_code(op), 0.0, &o, &x, &x)
}

/// `out = op(lhs, rhs)`.
pub(crate) fn binary(
    ctx: &Arc<DeviceContext>,
    op: BinaryOp,
    lhs: &Tensor,
    rhs: &Tensor,
    out: &Tensor,
) -> Result<()> {
    let a = ctx.operand(lhs)?;
    let b = ctx.operand(rhs)?;
    let o = ctx.output("binary", out)?;
    run(ctx, &spec("binary"), binary_code(op), 0.0, &o, &a, &b)
}

/// `out = op(x, scalar)`.
pub(crate) fn binary_scalar(
    ctx: &Arc<DeviceContext>,
    op: BinaryOp,
    x: &Tensor,
    scalar: f64,
    out: &Tensor,
) -> Result<()> {
    let x = ctx.operand(x)?;
    let o = ctx.output("binary_scalar", out)?;
    run(
        ctx,
        &spec("binary_scalar"),
        binary_code(op),
        scalar as f32,
        &o,
        &x,
        &x,
    )
}

/// `lhs_out = op(lhs_out, rhs)`.
pub(crate) fn binary_inplace(
    ctx: &Arc<DeviceContext>,
    op: BinaryOp,
    lhs_out: &Tensor,
    rhs: &Tensor,
) -> Result<()> {
    let b = ctx.operand(rhs)?;
    let o = ctx.output("binary_inplace", lhs_out)?;
    run(
        ctx,
        &spec("binary_inplace"),
        binary_code(op),
        0.0,
        &o,
        &b,
        &b,
    )
}

/// Dispatches one elementwise kernel over `out`'s elements.
fn run(
    ctx: &Arc<DeviceContext>,
    spec: &KernelSpec,
    code: u32,
    scalar: f32,
    out: &Operand<'_>,
    a: &Operand<'_>,
    b: &Operand<'_>,
) -> Result<()> {
    let op = spec.entry;
    let n = out.layout.elem_count();
    if n == 0 {
        return Ok(());
    }
    let (dims, strides) = collapse(
        out.layout.dims(),
        &[out.layout.strides(), a.layout.strides(), b.layout.strides()],
    );
    let operands = [out, a, b];
    let whole: Result<Vec<(BufferWindow<'_>, u32)>> = operands
        .iter()
        .zip(["output", "lhs", "rhs"])
        .map(|(t, what)| t.bind(ctx, op, what))
        .collect();
    match whole {
        Ok(windows) => {
            let mut p = Params::new();
            p.u(to_u32(n, op)?).u(code).f(scalar).u(0);
            for ((_, rel), s) in windows.iter().zip(&strides) {
                p.layout(op, *rel as usize, &dims, s)?;
            }
            let bindings: Vec<BufferWindow<'_>> = vec![windows[1].0, windows[2].0, windows[0].0];
            let groups = to_u32(n.div_ceil(WORKGROUP), op)?;
            ctx.dispatch(spec, &p, &bindings, groups)
        }
        Err(GpuError::TooLarge { .. }) if dims.len() <= 1 => {
            chunked(ctx, spec, code, scalar, &operands, &strides, n)
        }
        Err(e) => Err(e),
    }
}

/// Runs a dense (rank ≤ 1 after collapsing) elementwise kernel in element ranges that
/// each fit one binding per operand.
fn chunked(
    ctx: &Arc<DeviceContext>,
    spec: &KernelSpec,
    code: u32,
    scalar: f32,
    operands: &[&Operand<'_>; 3],
    strides: &[Vec<usize>],
    n: usize,
) -> Result<()> {
    let op = spec.entry;
    let step: Vec<usize> = strides
        .iter()
        .map(|s| s.first().copied().unwrap_or(0))
        .collect();
    if step.iter().any(|&s| s > 1) {
        return Err(GpuError::TooLarge {
            op,
            what: "a strided operand",
            bytes: operands[0].byte_range().1,
            limit: ctx.rules.max_size,
        });
    }
    let per_chunk = ctx.rules.rows_per_window(op, "an element", 4)? as usize;
    let mut i0 = 0;
    while i0 < n {
        let len = per_chunk.min(n - i0);
        let mut p = Params::new();
        p.u(to_u32(len, op)?).u(code).f(scalar).u(0);
        let mut windows = Vec::with_capacity(3);
        for (t, &s) in operands.iter().zip(&step) {
            let (start, _) = t.byte_range();
            let first = start + (i0 * s * 4) as u64;
            let last = first + ((len - 1) * s * 4) as u64 + 4;
            let (w, rel) = ctx.rules.window(op, "a chunk", t.block(), first, last)?;
            p.layout(op, (rel / 4) as usize, &[len], &[s])?;
            windows.push(w);
        }
        let bindings = [windows[1], windows[2], windows[0]];
        ctx.dispatch(spec, &p, &bindings, to_u32(len.div_ceil(WORKGROUP), op)?)?;
        i0 += len;
    }
    Ok(())
}
