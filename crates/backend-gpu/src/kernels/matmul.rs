//! Tiled batched matmul on strided F32/F16/BF16 views (transposed and broadcast inputs
//! are read in place), f32 accumulation.

use std::sync::Arc;

use tempra_tensor::Tensor;

use crate::device_context::DeviceContext;
use crate::error::Result;
use crate::kernels::{LOAD, compose, dtype_code, for_binding};
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

const TILE: usize = 64;

fn source(f16: bool) -> String {
    compose(
        f16,
        &[
            &for_binding(LOAD, "lhs"),
            &for_binding(LOAD, "rhs"),
            include_str!("matmul.wgsl"),
        ],
    )
}

const SPEC: KernelSpec = KernelSpec {
    name: "matmul",
    entry: "matmul",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    source,
    f16: false,
};

/// `a [.., M, K] · b [.., K, N]` into contiguous F32 `out [.., M, N]`.
pub(crate) fn matmul(ctx: &Arc<DeviceContext>, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    const OP: &str = "matmul";
    let r = out.rank();
    let (m, n) = (out.dims()[r - 2], out.dims()[r - 1]);
    let k = a.dims()[r - 1];
    let batches: usize = out.dims()[..r - 2].iter().product();
    if out.elem_count() == 0 {
        return Ok(());
    }
    let ao = ctx.operand(a)?;
    let bo = ctx.operand(b)?;
    let oo = ctx.output(OP, out)?;
    if k == 0 {
        // An empty sum: zeros.
        return crate::kernels::copy::fill(ctx, out, 0.0);
    }
    let (aw, arel) = ao.bind(ctx, OP, "lhs")?;
    let (bw, brel) = bo.bind(ctx, OP, "rhs")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let (sa, sb) = (ao.layout.strides(), bo.layout.strides());
    let (dims, strides) = collapse(&out.dims()[..r - 2], &[&sa[..r - 2], &sb[..r - 2]]);
    let (tiles_m, tiles_n) = (m.div_ceil(TILE), n.div_ceil(TILE));
    let mut p = Params::new();
    p.n(m, OP)?.n(n, OP)?.n(k, OP)?.n(batches, OP)?;
    p.u(dtype_code(a.dtype()).unwrap_or(0))
        .u(dtype_code(b.dtype()).unwrap_or(0));
    p.n(sa[r - 2], OP)?
        .n(sa[r - 1], OP)?
        .n(sb[r - 2], OP)?
        .n(sb[r - 1], OP)?;
    p.u(orel).n(tiles_m, OP)?.n(tiles_n, OP)?.u(0).u(0).u(0);
    p.layout(OP, arel as usize, &dims, &strides[0])?;
    p.layout(OP, brel as usize, &dims, &strides[1])?;
    let groups = to_u32(batches * tiles_m * tiles_n, OP)?;
    ctx.dispatch(&SPEC, &p, &[aw, bw, ow], groups)
}
