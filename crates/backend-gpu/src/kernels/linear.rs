//! `linear`: `x [.., K] · wᵀ (+ bias)` with `w [N, K]` in F32, F16, BF16, Q4_0, Q8_0,
//! Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS or MXFP4, dequantized in the shader (scale products in
//! f16 where the device has SHADER_F16). Weights larger than one binding are bound in
//! windows of rows.

use std::sync::Arc;

use tempra_tensor::{DType, Tensor};

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::kernels::rows::Rows;
use crate::kernels::{DEQUANT, LOAD, compose, dtype_code, for_binding, is_gpu_block, is_gpu_float};
use crate::params::{Params, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

/// Input rows per workgroup.
const ROWS_PER_GROUP: usize = 4;

fn source(f16: bool) -> String {
    compose(
        f16,
        &[
            &for_binding(LOAD, "w"),
            &for_binding(DEQUANT, "w"),
            include_str!("linear.wgsl"),
        ],
    )
}

const fn spec(f16: bool) -> KernelSpec {
    KernelSpec {
        name: "linear",
        entry: "linear",
        bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
        source,
        f16,
    }
}

/// Whether the GPU reads weights of `dtype`.
pub(crate) fn supports(dtype: DType) -> bool {
    is_gpu_float(dtype) || is_gpu_block(dtype)
}

/// `out [M, N] = x [M, K] · w [N, K]ᵀ (+ bias)`.
pub(crate) fn linear(
    ctx: &Arc<DeviceContext>,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "linear";
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let rows = Rows::of(x.layout());
    let m = rows.count;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // x·wᵀ is empty: zeros, plus the bias.
        crate::kernels::copy::fill(ctx, out, 0.0)?;
        if let Some(b) = bias {
            let b = b.broadcast_to(out.dims())?;
            return crate::kernels::elementwise::binary_inplace(
                ctx,
                tempra_tensor::BinaryOp::Add,
                out,
                &b,
            );
        }
        return Ok(());
    }
    let dtype = w.dtype();
    let bb = dtype.block_bytes();
    let xo = ctx.operand(x)?;
    let wo = ctx.operand(w)?;
    let bo = bias.map(|b| ctx.operand(b)).transpose()?;
    let oo = ctx.output(OP, out)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let (bw, brel, bstride) = match (&bo, bias) {
        (Some(bo), Some(b)) => {
            let (bw, brel) = bo.bind(ctx, OP, "bias")?;
            (bw, brel, b.layout().strides()[0])
        }
        _ => (ctx.placeholder(), 0, 0),
    };
    let (row_stride, col_stride) = (wo.layout.strides()[0], wo.layout.strides()[1]);
    let rows_per = match wo.bind(ctx, OP, "weight") {
        Ok(_) => n,
        Err(GpuError::TooLarge { .. }) => {
            ctx.rules
                .rows_per_window(OP, "a weight row", (row_stride * bb) as u64)? as usize
        }
        Err(e) => return Err(e),
    };
    let use_f16 = ctx.f16 && dtype.is_quantized();
    let m_tiles = m.div_ceil(ROWS_PER_GROUP);
    let mut n0 = 0;
    while n0 < n {
        let len = rows_per.min(n - n0);
        let rows_layout = wo.layout.narrow(0, n0, len)?;
        let start = (rows_layout.offset() * bb) as u64;
        let end = (rows_layout.units_spanned() * bb) as u64;
        let (ww, wrel) = ctx
            .rules
            .window(OP, "weight rows", wo.block(), start, end)?;
        let base = if dtype.is_quantized() {
            wrel
        } else {
            wrel / bb as u64
        };
        let mut p = Params::new();
        p.n(m, OP)?
            .n(len, OP)?
            .n(k, OP)?
            .u(dtype_code(dtype).unwrap_or(0));
        p.n(row_stride, OP)?.n(col_stride, OP)?.u(base as u32);
        p.n(dtype.block_len(), OP)?.n(bb, OP)?;
        p.u(bias.is_some() as u32).u(brel).n(bstride, OP)?;
        p.u(orel)
            .n(n, OP)?
            .n(n0, OP)?
            .n(rows.step, OP)?
            .n(m_tiles, OP)?;
        p.u(0).u(0).u(0);
        p.layout(OP, xrel as usize, &rows.dims, &rows.strides)?;
        let groups = to_u32(len * m_tiles, OP)?;
        ctx.dispatch(&spec(use_f16), &p, &[xw, ww, bw, ow], groups)?;
        n0 += len;
    }
    Ok(())
}
