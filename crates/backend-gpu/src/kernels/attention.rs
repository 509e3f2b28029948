//! Causal attention (GQA, sliding window, soft-cap, sinks) over f32 queries and f32/f16 keys
//! and values: one workgroup per query row with an online softmax.

use std::sync::Arc;

use tempra_tensor::{AttentionParams, DType, Tensor};

use crate::device_context::DeviceContext;
use crate::error::Result;
use crate::kernels::rows::Rows;
use crate::kernels::{LOAD, compose, dtype_code, for_binding};
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

/// The largest head dim (of q/k and of v) the kernel holds in workgroup memory.
pub(crate) const MAX_HEAD_DIM: usize = 512;

fn source(f16: bool) -> String {
    compose(
        f16,
        &[
            &for_binding(LOAD, "k"),
            &for_binding(LOAD, "v"),
            include_str!("attention.wgsl"),
        ],
    )
}

const SPEC: KernelSpec = KernelSpec {
    name: "attention",
    entry: "attention",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    source,
    f16: false,
};

/// The most query heads whose sinks the parameter block holds (after the layouts).
const MAX_SINK_HEADS: usize = 64;

/// Whether the kernel runs these inputs (else the backend falls back to the host).
/// Sinks travel in the parameter block: they must be host-readable f32 values (a
/// model keeps them on the host, as it does rope factors), at most
/// [`MAX_SINK_HEADS`] of them.
pub(crate) fn supports(q: &Tensor, k: &Tensor, v: &Tensor, sinks: Option<&Tensor>) -> bool {
    let r = q.rank();
    sinks.is_none_or(|s| host_sinks(s).is_some_and(|v| v.len() <= MAX_SINK_HEADS))
        && q.dtype() == DType::F32
        && matches!(k.dtype(), DType::F32 | DType::F16)
        && matches!(v.dtype(), DType::F32 | DType::F16)
        && q.dims()[r - 1] <= MAX_HEAD_DIM
        && v.dims()[r - 1] <= MAX_HEAD_DIM
}

/// The values of a host-resident, contiguous f32 sinks tensor, read in place.
fn host_sinks(s: &Tensor) -> Option<&[f32]> {
    if s.dtype() != DType::F32 {
        return None;
    }
    let range = s.layout().contiguous_range()?;
    s.host_slice::<f32>().ok()?.get(range)
}

/// The lead-dims layout of `t [.., T, H, D]` (collapsed), for locating a lead index.
fn lead_layout(t: &Tensor) -> (Vec<usize>, Vec<usize>) {
    let r = t.rank();
    let (dims, strides) = collapse(&t.dims()[..r - 3], &[&t.layout().strides()[..r - 3]]);
    (dims, strides.into_iter().next().unwrap_or_default())
}

/// Attention of `q [.., Tq, Hq, D]` over `k [.., Tk, Hkv, D]`, `v [.., Tk, Hkv, Dv]` into
/// contiguous `out [.., Tq, Hq, Dv]`, each row's softmax starting from its head's sink
/// where `sinks` are given (see [`supports`]).
pub(crate) fn attention(
    ctx: &Arc<DeviceContext>,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sinks: Option<&Tensor>,
    params: &AttentionParams,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "attention";
    let r = q.rank();
    let (tq, hq, d) = (q.dims()[r - 3], q.dims()[r - 2], q.dims()[r - 1]);
    let (tk, hkv, dv) = (k.dims()[r - 3], k.dims()[r - 2], v.dims()[r - 1]);
    let rows = Rows::of(q.layout());
    if rows.count == 0 || dv == 0 {
        return Ok(());
    }
    let qo = ctx.operand(q)?;
    let ko = ctx.operand(k)?;
    let vo = ctx.operand(v)?;
    let oo = ctx.output(OP, out)?;
    let (qw, qrel) = qo.bind(ctx, OP, "queries")?;
    let (kw, krel) = ko.bind(ctx, OP, "keys")?;
    let (vw, vrel) = vo.bind(ctx, OP, "values")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let (ks, vs) = (k.layout().strides(), v.layout().strides());
    let mut p = Params::new();
    p.n(rows.count, OP)?.n(tq, OP)?.n(hq, OP)?.n(hkv, OP)?;
    p.n(d, OP)?.n(dv, OP)?.n(tk, OP)?.f(params.scale);
    // Attention over every key: queries placed at or past the last key see them all.
    let (q_start, window) = if params.causal {
        (params.q_start, params.window.unwrap_or(0))
    } else {
        (tk, 0)
    };
    p.n(q_start, OP)?.n(window, OP)?;
    p.f(params.softcap.unwrap_or(0.0));
    p.u(dtype_code(k.dtype()).unwrap_or(0))
        .u(dtype_code(v.dtype()).unwrap_or(0));
    p.n(rows.step, OP)?;
    p.n(ks[r - 3], OP)?.n(ks[r - 2], OP)?.n(ks[r - 1], OP)?;
    p.n(vs[r - 3], OP)?.n(vs[r - 2], OP)?.n(vs[r - 1], OP)?;
    p.u(orel);
    p.layout(OP, qrel as usize, &rows.dims, &rows.strides)?;
    let (kd, kst) = lead_layout(k);
    p.layout(OP, krel as usize, &kd, &kst)?;
    let (vd, vst) = lead_layout(v);
    p.layout(OP, vrel as usize, &vd, &vst)?;
    match sinks.and_then(host_sinks) {
        Some(values) => {
            p.u(1);
            for &sink in values {
                p.f(sink);
            }
        }
        None => {
            p.u(0);
        }
    }
    ctx.dispatch(&SPEC, &p, &[qw, kw, vw, ow], to_u32(rows.count, OP)?)
}
