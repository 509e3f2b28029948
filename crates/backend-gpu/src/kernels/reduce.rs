//! Sum, mean, max and min along a dim, and argmax: one workgroup per output element.

use std::sync::Arc;

use tempra_tensor::{ReduceOp, Tensor};

use crate::device_context::DeviceContext;
use crate::error::Result;
use crate::kernels::compose;
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

fn source(f16: bool) -> String {
    compose(f16, &[include_str!("reduce.wgsl")])
}

const fn spec(entry: &'static str) -> KernelSpec {
    KernelSpec {
        name: "reduce",
        entry,
        bindings: &[Access::Read, Access::ReadWrite],
        source,
        f16: false,
    }
}

/// Reduces `x` along `dim` into contiguous `out` (F32; U32 indices for argmax).
pub(crate) fn reduce(
    ctx: &Arc<DeviceContext>,
    op: Option<ReduceOp>,
    x: &Tensor,
    dim: usize,
    out: &Tensor,
) -> Result<()> {
    let name = op.map_or("argmax", ReduceOp::name);
    let lanes = out.elem_count();
    if lanes == 0 {
        return Ok(());
    }
    let xo = ctx.operand(x)?;
    let oo = ctx.output(name, out)?;
    let (xw, xrel) = xo.bind(ctx, name, "input")?;
    let (ow, orel) = oo.bind(ctx, name, "output")?;
    let mut lane_dims = x.dims().to_vec();
    let mut lane_strides = x.layout().strides().to_vec();
    let step = lane_strides.remove(dim);
    lane_dims.remove(dim);
    let (dims, strides) = collapse(&lane_dims, &[&lane_strides]);
    let code = match op {
        Some(ReduceOp::Sum) | None => 0,
        Some(ReduceOp::Mean) => 1,
        Some(ReduceOp::Max) => 2,
        Some(ReduceOp::Min) => 3,
    };
    let mut p = Params::new();
    p.n(lanes, name)?
        .n(x.dims()[dim], name)?
        .u(code)
        .n(step, name)?;
    p.u(orel).u(0).u(0).u(0);
    p.layout(name, xrel as usize, &dims, &strides[0])?;
    let entry = if op.is_some() { "reduce" } else { "argmax" };
    ctx.dispatch(&spec(entry), &p, &[xw, ow], to_u32(lanes, name)?)
}
