//! Copies (any layout to any layout, with plain dtype conversion), block copies,
//! dequantization to floats, and fill.
//!
//! Dense, word-aligned copies of one dtype become `copy_buffer_to_buffer` commands (no
//! binding limit); zero fills of dense, word-aligned regions become `clear_buffer`.

use std::sync::Arc;

use half::{bf16, f16};
use tempra_tensor::{DType, Tensor, TensorError};

use crate::device_context::DeviceContext;
use crate::error::{GpuError, Result};
use crate::kernels::{
    CONVERT, DEQUANT, compose, dtype_code, for_binding, is_gpu_block, is_gpu_float,
};
use crate::operand::Operand;
use crate::params::{Params, collapse, to_u32};
use crate::pipeline_cache::{Access, KernelSpec};

const WORKGROUP: usize = 256;

fn source(f16: bool) -> String {
    compose(
        f16,
        &[
            CONVERT,
            &for_binding(DEQUANT, "src"),
            include_str!("copy.wgsl"),
        ],
    )
}

const fn spec(entry: &'static str) -> KernelSpec {
    KernelSpec {
        name: "copy",
        entry,
        bindings: &[Access::Read, Access::ReadWrite],
        source,
        f16: false,
    }
}

/// Whether the GPU copies `src` into `dst` (else the backend falls back to the host).
pub(crate) fn supports(src: DType, dst: DType) -> bool {
    match (src.is_quantized(), dst.is_quantized()) {
        (false, false) => src == dst || (src != DType::F64 && dst != DType::F64),
        (true, true) => src == dst,
        (true, false) => is_gpu_block(src) && is_gpu_float(dst),
        (false, true) => false,
    }
}

/// The byte range of a dense operand, when it is dense and word-aligned.
fn dense_aligned(t: &Operand<'_>) -> Option<(u64, u64)> {
    let (start, end) = t.byte_range();
    (t.layout.is_contiguous() && start % 4 == 0 && end % 4 == 0).then_some((start, end))
}

/// Copies `src` element by element into `dst`'s layout.
pub(crate) fn copy(ctx: &Arc<DeviceContext>, src: &Tensor, dst: &Tensor) -> Result<()> {
    const OP: &str = "copy";
    let (sd, dd) = (src.dtype(), dst.dtype());
    if !supports(sd, dd) {
        return Err(GpuError::Tensor(TensorError::Unsupported {
            op: OP,
            backend: crate::BACKEND_NAME,
            what: format!("{sd} to {dd}"),
        }));
    }
    if src.dims() != dst.dims() {
        return Err(GpuError::Tensor(TensorError::ShapeMismatch {
            op: OP,
            lhs: *src.shape(),
            rhs: *dst.shape(),
        }));
    }
    if src.elem_count() == 0 {
        return Ok(());
    }
    let s = ctx.operand(src)?;
    let d = ctx.output(OP, dst)?;
    if sd == dd
        && let (Some((s0, s1)), Some((d0, _))) = (dense_aligned(&s), dense_aligned(&d))
    {
        return ctx.record_copy(s.block(), s0, d.block(), d0, s1 - s0);
    }
    let (sw, srel) = s.bind(ctx, OP, "source")?;
    let (dw, drel) = d.bind(ctx, OP, "destination")?;
    let mut p = Params::new();
    let entry;
    let n;
    if !sd.is_quantized() {
        entry = "copy_plain";
        n = src.elem_count();
        let (dims, strides) = collapse(src.dims(), &[s.layout.strides(), d.layout.strides()]);
        header(&mut p, n, sd, dd, 0, 0, 0, 0, 0, 0)?;
        p.layout(OP, srel as usize, &dims, &strides[0])?;
        p.layout(OP, drel as usize, &dims, &strides[1])?;
    } else if dd.is_quantized() {
        entry = "copy_blocks";
        let bb = sd.block_bytes();
        n = s.layout.unit_count() * bb;
        let units = s.layout.unit_shape();
        let (dims, strides) = collapse(units.dims(), &[s.layout.strides(), d.layout.strides()]);
        header(&mut p, n, sd, dd, srel, drel, bb, sd.block_len(), 0, 0)?;
        p.layout(OP, 0, &dims, &strides[0])?;
        p.layout(OP, 0, &dims, &strides[1])?;
    } else {
        entry = "dequantize";
        n = src.elem_count();
        let last = src.shape().last();
        let units = s.layout.unit_shape();
        let (sdims, sstrides) = collapse(units.dims(), &[s.layout.strides()]);
        let (ddims, dstrides) = collapse(d.layout.dims(), &[d.layout.strides()]);
        header(
            &mut p,
            n,
            sd,
            dd,
            srel,
            0,
            sd.block_bytes(),
            sd.block_len(),
            last,
            0,
        )?;
        p.layout(OP, 0, &sdims, &sstrides[0])?;
        p.layout(OP, drel as usize, &ddims, &dstrides[0])?;
    }
    let groups = to_u32(n.div_ceil(WORKGROUP), OP)?;
    ctx.dispatch(&spec(entry), &p, &[sw, dw], groups)
}

/// Words 0..10 of the copy kernel's parameters.
fn header(
    p: &mut Params,
    n: usize,
    sd: DType,
    dd: DType,
    src_base: u32,
    dst_base: u32,
    block_bytes: usize,
    block_len: usize,
    last: usize,
    fill: u64,
) -> Result<()> {
    const OP: &str = "copy";
    p.n(n, OP)?;
    p.u(dtype_code(sd).unwrap_or(u32::MAX));
    p.u(dtype_code(dd).unwrap_or(u32::MAX));
    p.u(src_base).u(dst_base);
    p.n(block_bytes, OP)?.n(block_len, OP)?.n(last, OP)?;
    p.u(fill as u32).u((fill >> 32) as u32);
    Ok(())
}

/// The bits of `value` in a plain dtype, as the fill kernel stores them.
fn fill_bits(dtype: DType, value: f64) -> u64 {
    match dtype {
        DType::F64 => value.to_bits(),
        DType::F32 => (value as f32).to_bits() as u64,
        DType::F16 => f16::from_f64(value).to_bits() as u64,
        DType::BF16 => bf16::from_f64(value).to_bits() as u64,
        DType::I32 => (value as i32) as u32 as u64,
        DType::U32 => (value as u32) as u64,
        DType::U8 => (value as u8) as u64,
        _ => 0,
    }
}

/// Sets every element of `out` (a plain dtype) to `value`.
pub(crate) fn fill(ctx: &Arc<DeviceContext>, out: &Tensor, value: f64) -> Result<()> {
    const OP: &str = "fill";
    let dtype = out.dtype();
    if dtype.is_quantized() {
        return Err(GpuError::Tensor(TensorError::DType {
            op: OP,
            dtype,
            what: "a plain dtype",
        }));
    }
    if out.elem_count() == 0 {
        return Ok(());
    }
    let d = ctx.output(OP, out)?;
    let bits = fill_bits(dtype, value);
    if bits == 0
        && let Some((start, end)) = dense_aligned(&d)
    {
        return ctx.record_clear(d.block(), start, end - start);
    }
    let (dw, drel) = d.bind(ctx, OP, "output")?;
    let n = out.elem_count();
    let (dims, strides) = collapse(d.layout.dims(), &[d.layout.strides()]);
    let mut p = Params::new();
    header(&mut p, n, dtype, dtype, 0, 0, 0, 0, 0, bits)?;
    p.layout(OP, 0, &dims, &strides[0])?; // src: unused
    p.layout(OP, drel as usize, &dims, &strides[0])?;
    // The fill entry reads no source: bind the device's placeholder buffer there.
    let sw = ctx.placeholder();
    ctx.dispatch(
        &spec("fill"),
        &p,
        &[sw, dw],
        to_u32(n.div_ceil(WORKGROUP), OP)?,
    )
}
