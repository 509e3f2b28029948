//! Rotary position embedding (and its inverse). The inverse frequencies are computed on
//! the host in f64 (every scaling mode) into a small table kept per distinct content
//! (`DeviceContext::rope_table`); GGUF frequency factors, when given, are copied after
//! them on the GPU.

use std::sync::Arc;

use tempra_tensor::{RopeConfig, RopeStyle, Tensor};

use crate::device_context::DeviceContext;
use crate::error::Result;
use crate::kernels::compose;
use crate::kernels::rows::Rows;
use crate::params::{Params, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

fn source(f16: bool) -> String {
    compose(f16, &[include_str!("rope.wgsl")])
}

const SPEC: KernelSpec = KernelSpec {
    name: "rope",
    entry: "rope",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    source,
    f16: false,
};

/// Rope of `x [.., T, H, D]` at U32 `positions [T]` into contiguous `out`.
pub(crate) fn rope(
    ctx: &Arc<DeviceContext>,
    x: &Tensor,
    positions: &Tensor,
    config: &RopeConfig,
    freq_factors: Option<&Tensor>,
    inverse: bool,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "rope";
    let n = x.elem_count();
    if n == 0 {
        return Ok(());
    }
    let r = x.rank();
    let (t, h, d) = (x.dims()[r - 3], x.dims()[r - 2], x.dims()[r - 1]);
    let half = config.rotary_dims / 2;
    let mut inv: Vec<f32> = (0..half).map(|i| config.inv_freq(i, 1.0) as f32).collect();
    let table_bytes = half * 4 * if freq_factors.is_some() { 2 } else { 1 };
    // Contiguous factors are copied into the table in command order on every call; a
    // strided factor view (rare) is read back and becomes part of the table's content.
    let copied = match freq_factors {
        Some(ff) if ctx.operand(ff)?.layout.is_contiguous() => Some(ff),
        Some(ff) => {
            inv.extend(ff.to_vec::<f32>()?);
            None
        }
        None => None,
    };
    let host_bytes = inv.len() * 4;
    let table = ctx.rope_table(
        bytemuck::cast_slice(&inv),
        table_bytes.saturating_sub(host_bytes),
    )?;
    if let Some(ff) = copied {
        let fo = ctx.operand(ff)?;
        let (start, end) = fo.byte_range();
        ctx.record_copy(fo.block(), start, &table, (half * 4) as u64, end - start)?;
    }
    let xo = ctx.operand(x)?;
    let po = ctx.operand(positions)?;
    let oo = ctx.output(OP, out)?;
    let (xw, xrel) = xo.bind(ctx, OP, "input")?;
    let (pw, prel) = po.bind(ctx, OP, "positions")?;
    let (tw, _) = ctx
        .rules
        .window(OP, "frequencies", &table, 0, table_bytes.max(4) as u64)?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let rows = Rows::of(x.layout());
    let mut p = Params::new();
    p.n(n, OP)?.n(d, OP)?.n(h, OP)?.n(t, OP)?;
    p.n(config.rotary_dims, OP)?
        .u((config.style == RopeStyle::Neox) as u32)
        .f(if inverse { -1.0 } else { 1.0 })
        .u(freq_factors.is_some() as u32);
    p.u(prel).n(positions.layout().strides()[0], OP)?;
    p.n(rows.step, OP)?
        .u(orel)
        .f(config.attention_factor as f32);
    p.layout(OP, xrel as usize, &rows.dims, &rows.strides)?;
    ctx.dispatch(&SPEC, &p, &[xw, pw, tw, ow], to_u32(n.div_ceil(256), OP)?)
}
