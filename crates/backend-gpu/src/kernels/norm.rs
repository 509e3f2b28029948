//! RMS norm and layer norm over the last dim: one workgroup per row.

use std::sync::Arc;

use tempra_tensor::Tensor;

use crate::device_context::DeviceContext;
use crate::error::Result;
use crate::kernels::rows::Rows;
use crate::kernels::{LOAD, compose, dtype_code, for_binding};
use crate::params::{Params, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

fn source(f16: bool) -> String {
    compose(
        f16,
        &[
            &for_binding(LOAD, "w"),
            &for_binding(LOAD, "bias"),
            include_str!("norm.wgsl"),
        ],
    )
}

const fn spec(entry: &'static str) -> KernelSpec {
    KernelSpec {
        name: "norm",
        entry,
        bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
        source,
        f16: false,
    }
}

/// `rms_norm` (no `b`, `layer` false) or `layer_norm` of `x` over its last dim with
/// F32/F16/BF16 weight `w` (and bias `b`) into contiguous `out`.
pub(crate) fn norm(
    ctx: &Arc<DeviceContext>,
    layer: bool,
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    eps: f64,
    out: &Tensor,
) -> Result<()> {
    let op = if layer { "layer_norm" } else { "rms_norm" };
    let rows = Rows::of(x.layout());
    if rows.count == 0 || rows.len == 0 {
        return Ok(());
    }
    let xo = ctx.operand(x)?;
    let wo = ctx.operand(w)?;
    let bo = b.map(|b| ctx.operand(b)).transpose()?;
    let oo = ctx.output(op, out)?;
    let (xw, xrel) = xo.bind(ctx, op, "input")?;
    let (ww, wrel) = wo.bind(ctx, op, "weight")?;
    let (bw, brel, b_dtype, b_stride) = match (&bo, b) {
        (Some(bo), Some(b)) => {
            let (bw, brel) = bo.bind(ctx, op, "bias")?;
            (
                bw,
                brel,
                dtype_code(b.dtype()).unwrap_or(0),
                b.layout().strides()[0],
            )
        }
        _ => (ctx.placeholder(), 0, 0, 0),
    };
    let (ow, orel) = oo.bind(ctx, op, "output")?;
    let mut p = Params::new();
    p.n(rows.count, op)?
        .n(rows.len, op)?
        .f(eps as f32)
        .n(rows.step, op)?;
    p.u(dtype_code(w.dtype()).unwrap_or(0))
        .u(wrel)
        .n(w.layout().strides()[0], op)?;
    p.u(b.is_some() as u32).u(b_dtype).u(brel).n(b_stride, op)?;
    p.u(orel);
    p.layout(op, xrel as usize, &rows.dims, &rows.strides)?;
    let entry = if layer { "layer_norm" } else { "rms_norm" };
    ctx.dispatch(&spec(entry), &p, &[xw, ww, bw, ow], to_u32(rows.count, op)?)
}
