//! Softmax and log-softmax along the last dim: one workgroup per row.

use std::sync::Arc;

use tempra_tensor::Tensor;

use crate::device_context::DeviceContext;
use crate::error::Result;
use crate::kernels::compose;
use crate::kernels::rows::Rows;
use crate::params::{Params, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

fn source(f16: bool) -> String {
    compose(f16, &[include_str!("softmax.wgsl")])
}

const SPEC: KernelSpec = KernelSpec {
    name: "softmax",
    entry: "softmax",
    bindings: &[Access::Read, Access::ReadWrite],
    source,
    f16: false,
};

/// Softmax (or log-softmax) of `x` along its last dim into contiguous `out`.
pub(crate) fn softmax(ctx: &Arc<DeviceContext>, x: &Tensor, log: bool, out: &Tensor) -> Result<()> {
    const OP: &str = "softmax";
    let rows = Rows::of(x.layout());
    if rows.count == 0 || rows.len == 0 {
        return Ok(());
    }
    let xo = ctx.operand(x)?;
    let oo = ctx.output(OP, out)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let mut p = Params::new();
    p.n(rows.count, OP)?
        .n(rows.len, OP)?
        .u(log as u32)
        .n(rows.step, OP)?;
    p.u(orel).u(0).u(0).u(0);
    p.layout(OP, xrel as usize, &rows.dims, &rows.strides)?;
    ctx.dispatch(&SPEC, &p, &[xw, ow], to_u32(rows.count, OP)?)
}
