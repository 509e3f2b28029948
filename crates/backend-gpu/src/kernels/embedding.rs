//! Embedding lookup from F32/F16/BF16 or Q4_0/Q8_0/Q4_K/Q5_K/Q6_K tables. Tables larger
//! than one binding are bound in windows of rows, one dispatch each.
//!
//! Ids are validated on the host first (a read-back of the ids: one u32 per position),
//! so an id past the vocabulary is an error naming it, as on the CPU.

use std::sync::Arc;

use tempra_tensor::{DType, Tensor, TensorError};

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::kernels::{DEQUANT, LOAD, compose, dtype_code, for_binding, is_gpu_block, is_gpu_float};
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

fn source(f16: bool) -> String {
    compose(
        f16,
        &[
            &for_binding(LOAD, "table"),
            &for_binding(DEQUANT, "table"),
            include_str!("embedding.wgsl"),
        ],
    )
}

const SPEC: KernelSpec = KernelSpec {
    name: "embedding",
    entry: "embedding",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    source,
    f16: false,
};

/// Whether the GPU reads tables of `dtype`.
pub(crate) fn supports(dtype: DType) -> bool {
    is_gpu_float(dtype) || is_gpu_block(dtype)
}

/// Checks every id against the vocabulary (reads the ids back).
pub(crate) fn check_ids(op: &'static str, ids: &Tensor, vocab: usize) -> Result<()> {
    for (position, id) in ids.to_vec::<u32>()?.into_iter().enumerate() {
        if id as usize >= vocab {
            return Err(GpuError::Tensor(TensorError::Argument {
                op,
                name: "ids",
                reason: format!(
                    "id {id} at position {position} is out of range for a vocabulary of {vocab}"
                ),
            }));
        }
    }
    Ok(())
}

/// Rows of `table [V, D]` at U32 `ids` into contiguous F32 `out [.., D]`.
pub(crate) fn embedding(
    ctx: &Arc<DeviceContext>,
    table: &Tensor,
    ids: &Tensor,
    out: &Tensor,
) -> Result<()> {
    const OP: &str = "embedding";
    let (vocab, d) = (table.dims()[0], table.dims()[1]);
    check_ids(OP, ids, vocab)?;
    let n = out.elem_count();
    if n == 0 {
        return Ok(());
    }
    let dtype = table.dtype();
    let bb = dtype.block_bytes();
    let to = ctx.operand(table)?;
    let io = ctx.operand(ids)?;
    let oo = ctx.output(OP, out)?;
    let (iw, irel) = io.bind(ctx, OP, "ids")?;
    let (ow, orel) = oo.bind(ctx, OP, "output")?;
    let (id_dims, id_strides) = collapse(ids.dims(), &[ids.layout().strides()]);
    let (row_stride, col_stride) = (to.layout.strides()[0], to.layout.strides()[1]);
    let rows_per = match to.bind(ctx, OP, "table") {
        Ok(_) => vocab,
        Err(GpuError::TooLarge { .. }) => {
            ctx.rules
                .rows_per_window(OP, "a table row", (row_stride * bb) as u64)? as usize
        }
        Err(e) => return Err(e),
    };
    let mut v0 = 0;
    while v0 < vocab {
        let len = rows_per.min(vocab - v0);
        let rows = to.layout.narrow(0, v0, len)?;
        let start = (rows.offset() * bb) as u64;
        let end = (rows.units_spanned() * bb) as u64;
        let (tw, trel) = ctx.rules.window(OP, "table rows", to.block(), start, end)?;
        // Plain dtypes: the base in units of the binding; blocks: in bytes.
        let base = if dtype.is_quantized() {
            trel
        } else {
            trel / bb as u64
        };
        let mut p = Params::new();
        p.n(n, OP)?.n(d, OP)?.u(dtype_code(dtype).unwrap_or(0));
        p.n(row_stride, OP)?.n(col_stride, OP)?.u(base as u32);
        p.n(dtype.block_len(), OP)?
            .n(bb, OP)?
            .n(v0, OP)?
            .n(v0 + len, OP)?
            .u(orel);
        p.layout(OP, irel as usize, &id_dims, &id_strides[0])?;
        ctx.dispatch(&SPEC, &p, &[tw, iw, ow], to_u32(n.div_ceil(256), OP)?)?;
        v0 += len;
    }
    Ok(())
}
