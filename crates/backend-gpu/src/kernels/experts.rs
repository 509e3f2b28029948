//! The mixture-of-experts ops on the device: `top_k` (one invocation per row, the
//! selection in `tempra_tensor::ordering`'s order), `gather` and `weighted_sum` (one
//! invocation per output element, slots summed in order) and `expert_linear`: the rows
//! grouped by expert on the device first (`expert_rows`, one workgroup), then one
//! workgroup per (weight row, tile of up to four rows routed to one expert), each weight
//! value dequantized once per tile, in every dtype `linear` reads; stacks larger than one
//! binding are bound a window of experts at a time; a bias is a second pass,
//! `expert_bias`, as WebGPU guarantees only four storage bindings per kernel.

use std::sync::Arc;

use tempra_tensor::Tensor;

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::kernels::rows::Rows;
use crate::kernels::{DEQUANT, LOAD, compose, dtype_code, for_binding};
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

/// Invocations per workgroup of the one-invocation-per-item kernels.
const GROUP: usize = 64;

fn top_k_source(f16: bool) -> String {
    compose(f16, &[include_str!("top_k.wgsl")])
}

fn gather_source(f16: bool) -> String {
    compose(f16, &[include_str!("gather.wgsl")])
}

fn weighted_sum_source(f16: bool) -> String {
    compose(f16, &[include_str!("weighted_sum.wgsl")])
}

fn expert_bias_source(f16: bool) -> String {
    compose(f16, &[include_str!("expert_bias.wgsl")])
}

fn expert_rows_source(f16: bool) -> String {
    compose(f16, &[include_str!("expert_rows.wgsl")])
}

fn expert_linear_source(f16: bool) -> String {
    compose(
        f16,
        &[
            &for_binding(LOAD, "w"),
            &for_binding(DEQUANT, "w"),
            include_str!("expert_linear.wgsl"),
        ],
    )
}

const TOP_K: KernelSpec = KernelSpec {
    name: "top_k",
    entry: "top_k",
    bindings: &[Access::Read, Access::ReadWrite, Access::ReadWrite],
    source: top_k_source,
    f16: false,
};

const GATHER: KernelSpec = KernelSpec {
    name: "gather",
    entry: "gather",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    source: gather_source,
    f16: false,
};

const WEIGHTED_SUM: KernelSpec = KernelSpec {
    name: "weighted_sum",
    entry: "weighted_sum",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    source: weighted_sum_source,
    f16: false,
};

const EXPERT_BIAS: KernelSpec = KernelSpec {
    name: "expert_bias",
    entry: "expert_bias",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    source: expert_bias_source,
    f16: false,
};

const EXPERT_ROWS: KernelSpec = KernelSpec {
    name: "expert_rows",
    entry: "expert_rows",
    bindings: &[Access::Read, Access::ReadWrite],
    source: expert_rows_source,
    f16: false,
};

/// Rows per `expert_linear` tile (rows routed to one expert that share each dequantized
/// weight value), as `linear`'s tiles.
const TILE_ROWS: usize = 4;

const fn expert_linear_spec(f16: bool) -> KernelSpec {
    KernelSpec {
        name: "expert_linear",
        entry: "expert_linear",
        bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
        source: expert_linear_source,
        f16,
    }
}

/// Pads `p` with zero words up to word `index` (the next packed layout's position).
fn pad_to(p: &mut Params, index: usize) {
    while p.words().len() < index {
        p.u(0);
    }
}

/// The `k` largest values of each row of `x [.., N]` (F32) into contiguous `values`
/// (F32) and `indices` (U32) `[.., k]`.
pub(crate) fn top_k(
    ctx: &Arc<DeviceContext>,
    x: &Tensor,
    values: &Tensor,
    indices: &Tensor,
) -> Result<()> {
    const OP: &str = "top_k";
    let rows = Rows::of(x.layout());
    let k = values.shape().last();
    if rows.count == 0 || k == 0 {
        return Ok(());
    }
    let xo = ctx.operand(x)?;
    let vo = ctx.output(OP, values)?;
    let io = ctx.output(OP, indices)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (vw, vrel) = vo.bind(ctx, OP, "values")?;
    let (iw, irel) = io.bind(ctx, OP, "indices")?;
    let mut p = Params::new();
    p.n(rows.count, OP)?
        .n(rows.len, OP)?
        .n(k, OP)?
        .n(rows.step, OP)?;
    p.u(vrel).u(irel).u(0).u(0);
    p.layout(OP, xrel as usize, &rows.dims, &rows.strides)?;
    let groups = to_u32(rows.count.div_ceil(GROUP), OP)?;
    ctx.dispatch(&TOP_K, &p, &[xw, vw, iw], groups)
}

/// `out [.., k] = x[.., indices[.., j]]` along the last dim (F32 `x`, any strides; U32
/// `indices`; `out` contiguous). An index past the last dim gives NaN, as the reference
/// does (indices on the device are not read back to check).
pub(crate) fn gather(
    ctx: &Arc<DeviceContext>,
    x: &Tensor,
    indices: &Tensor,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "gather";
    let outputs = out.elem_count();
    if outputs == 0 {
        return Ok(());
    }
    let (n, k) = (x.shape().last(), indices.shape().last());
    let xo = ctx.operand(x)?;
    let io = ctx.operand(indices)?;
    let oo = ctx.output(OP, out)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (iw, irel) = io.bind(ctx, OP, "indices")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let (x_dims, x_strides) = collapse(x.dims(), &[x.layout().strides()]);
    let (i_dims, i_strides) = collapse(indices.dims(), &[indices.layout().strides()]);
    let mut p = Params::new();
    p.n(outputs, OP)?.n(n, OP)?.n(k, OP)?.u(orel);
    pad_to(&mut p, 8);
    p.layout(OP, xrel as usize, &x_dims, &x_strides[0])?;
    p.layout(OP, irel as usize, &i_dims, &i_strides[0])?;
    let groups = to_u32(outputs.div_ceil(GROUP), OP)?;
    ctx.dispatch(&GATHER, &p, &[xw, iw, ow], groups)
}

/// `out [.., D] = Σ_s weights[.., s] · x[.., s, :]` (F32; `out` contiguous).
pub(crate) fn weighted_sum(
    ctx: &Arc<DeviceContext>,
    x: &Tensor,
    weights: &Tensor,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "weighted_sum";
    let r = x.rank();
    let (k, d) = (x.dims()[r - 2], x.dims()[r - 1]);
    let tokens: usize = x.dims()[..r - 2].iter().product();
    if tokens == 0 || d == 0 {
        return Ok(());
    }
    let xo = ctx.operand(x)?;
    let wo = ctx.operand(weights)?;
    let oo = ctx.output(OP, out)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (ww, wrel) = wo.bind(ctx, OP, "weights")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let (x_dims, x_strides) = collapse(x.dims(), &[x.layout().strides()]);
    let (w_dims, w_strides) = collapse(weights.dims(), &[weights.layout().strides()]);
    let mut p = Params::new();
    p.n(tokens, OP)?.n(k, OP)?.n(d, OP)?.u(orel);
    pad_to(&mut p, 8);
    p.layout(OP, xrel as usize, &x_dims, &x_strides[0])?;
    p.layout(OP, wrel as usize, &w_dims, &w_strides[0])?;
    let groups = to_u32((tokens * d).div_ceil(GROUP), OP)?;
    ctx.dispatch(&WEIGHTED_SUM, &p, &[xw, ww, ow], groups)
}

/// `out [T, k, N]` (contiguous): row `(t, s)` is `x[t, s] · w[ids[t, s]]ᵀ (+ bias)` for
/// `x [T, k, K]` (F32, any strides: a `[T, 1, K]` input broadcast), `w [E, N, K]` in a
/// dtype `linear` reads, `ids [T, k]` U32 and `bias [E, N]` F32.
pub(crate) fn expert_linear(
    ctx: &Arc<DeviceContext>,
    x: &Tensor,
    w: &Tensor,
    ids: &Tensor,
    bias: Option<&Tensor>,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "expert_linear";
    let (experts, n, k) = (w.dims()[0], w.dims()[1], w.dims()[2]);
    let rows = Rows::of(x.layout());
    if rows.count == 0 || n == 0 {
        return Ok(());
    }
    let dtype = w.dtype();
    let bb = dtype.block_bytes();
    let xo = ctx.operand(x)?;
    let wo = ctx.operand(w)?;
    let io = ctx.operand(ids)?;
    let bo = bias.map(|b| ctx.operand(b)).transpose()?;
    let oo = ctx.output(OP, out)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (iw, irel) = io.bind(ctx, OP, "ids")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let strides = wo.layout.strides();
    let (expert_stride, row_stride, col_stride) = (strides[0], strides[1], strides[2]);
    let per_window = match wo.bind(ctx, OP, "weight") {
        Ok(_) => experts,
        Err(GpuError::TooLarge { .. }) => {
            ctx.rules
                .rows_per_window(OP, "an expert", (expert_stride * bb) as u64)? as usize
        }
        Err(e) => return Err(e),
    };
    let (id_dims, id_strides) = collapse(ids.dims(), &[ids.layout().strides()]);
    // The rows grouped by expert (`expert_rows.wgsl` says the layout), in the kernel's
    // own scratch buffer (`KernelScratch` says why not a pooled lease).
    let buckets = experts + 1;
    let words = 2 * (buckets + 1) + rows.count;
    ctx.expert_grouping
        .with(OP, &ctx.owned_memory, words * 4, |grouping| {
            let (gw, _) = ctx
                .rules
                .window(OP, "grouping", grouping, 0, (words * 4) as u64)?;
            let mut p = Params::new();
            p.n(rows.count, OP)?.n(experts, OP)?.n(TILE_ROWS, OP)?;
            pad_to(&mut p, 8);
            p.layout(OP, irel as usize, &id_dims, &id_strides[0])?;
            ctx.dispatch(&EXPERT_ROWS, &p, &[iw, gw], 1)?;
            // At most ceil(rows / TILE_ROWS) tiles plus one partial tile per bucket.
            let tiles = rows.count.div_ceil(TILE_ROWS) + buckets;
            let use_f16 = ctx.f16 && dtype.is_quantized();
            let mut e0 = 0;
            while e0 < experts {
                let len = per_window.min(experts - e0);
                let window = wo.layout.narrow(0, e0, len)?;
                let start = (window.offset() * bb) as u64;
                let end = (window.units_spanned() * bb) as u64;
                let (ww, wrel) = ctx.rules.window(OP, "experts", wo.block(), start, end)?;
                let base = if dtype.is_quantized() {
                    wrel
                } else {
                    wrel / bb as u64
                };
                let mut p = Params::new();
                p.n(rows.count, OP)?
                    .n(n, OP)?
                    .n(k, OP)?
                    .u(dtype_code(dtype).unwrap_or(0));
                p.n(row_stride, OP)?.n(col_stride, OP)?.u(base as u32);
                p.n(dtype.block_len(), OP)?.n(bb, OP)?;
                p.u(0).u(0).u(0);
                p.u(orel).n(n, OP)?.u(0).n(rows.step, OP)?;
                p.n(expert_stride, OP)?.n(e0, OP)?.n(e0 + len, OP)?;
                p.n(tiles, OP)?.n(experts, OP)?;
                pad_to(&mut p, 24);
                p.layout(OP, xrel as usize, &rows.dims, &rows.strides)?;
                let groups = to_u32(n * tiles, OP)?;
                ctx.dispatch(&expert_linear_spec(use_f16), &p, &[xw, ww, gw, ow], groups)?;
                e0 += len;
            }
            Ok(())
        })?;
    let (Some(bo), Some(b)) = (&bo, bias) else {
        return Ok(());
    };
    let (bw, brel) = bo.bind(ctx, OP, "bias")?;
    let mut p = Params::new();
    p.n(rows.count, OP)?.n(n, OP)?.n(experts, OP)?.u(orel);
    p.u(brel)
        .n(b.layout().strides()[0], OP)?
        .n(b.layout().strides()[1], OP)?
        .u(0);
    p.layout(OP, irel as usize, &id_dims, &id_strides[0])?;
    let groups = to_u32((rows.count * n).div_ceil(GROUP), OP)?;
    ctx.dispatch(&EXPERT_BIAS, &p, &[bw, iw, ow], groups)
}
