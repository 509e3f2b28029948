//! Reference upload, fill, copy (with dtype conversion, dequantization and quantization)
//! and quantize.

use crate::error::{Result, TensorError};
use crate::layout::StridedIndex;
use crate::quant;
use crate::reference::host_access::{Reader, Writer, unsupported};
use crate::tensor::Tensor;

pub(crate) fn upload(src: &[u8], out: &mut Tensor) -> Result<()> {
    let range = out
        .layout()
        .contiguous_range()
        .ok_or_else(|| unsupported("upload", "a strided output".into()))?;
    let bb = out.dtype().block_bytes();
    let dst = &mut out.host_slice_mut::<u8>()?[range.start * bb..range.end * bb];
    if dst.len() != src.len() {
        return Err(TensorError::Argument {
            op: "upload",
            name: "src",
            reason: format!("{} bytes for an output of {}", src.len(), dst.len()),
        });
    }
    dst.copy_from_slice(src);
    Ok(())
}

pub(crate) fn fill(out: &mut Tensor, value: f64) -> Result<()> {
    let layout = *out.layout();
    let mut w = Writer::new(out)?;
    for unit in StridedIndex::new(&layout) {
        w.set(unit, value);
    }
    Ok(())
}

pub(crate) fn copy(src: &Tensor, dst: &mut Tensor) -> Result<()> {
    let (sd, dd) = (src.dtype(), dst.dtype());
    if src.dims() != dst.dims() {
        return Err(TensorError::ShapeMismatch {
            op: "copy",
            lhs: *src.shape(),
            rhs: *dst.shape(),
        });
    }
    let r = Reader::new(src)?;
    let dst_layout = *dst.layout();
    let mut w = Writer::new(dst)?;
    match (sd.is_quantized(), dd.is_quantized()) {
        (false, false) => {
            for (s, d) in StridedIndex::new(src.layout()).zip(StridedIndex::new(&dst_layout)) {
                w.set(d, r.get(s));
            }
        }
        (true, true) if sd == dd => {
            let bb = sd.block_bytes();
            let bytes = r.bytes();
            for (s, d) in StridedIndex::new(src.layout()).zip(StridedIndex::new(&dst_layout)) {
                w.unit_bytes(d)
                    .copy_from_slice(&bytes[s * bb..(s + 1) * bb]);
            }
        }
        (true, false) => {
            let bl = sd.block_len();
            let mut block = [0f32; 256];
            let mut dst_units = StridedIndex::new(&dst_layout);
            for s in StridedIndex::new(src.layout()) {
                r.dequantize_block(s, &mut block[..bl])?;
                for &v in &block[..bl] {
                    let d = dst_units
                        .next()
                        .ok_or_else(|| unsupported("copy", "mismatched unit counts".into()))?;
                    w.set(d, v as f64);
                }
            }
        }
        (false, true) => {
            // Each destination block from the next `block_len` source values (the last
            // dim, in order): a float row quantized into a block row (a quantized KV
            // cache's write).
            let bl = dd.block_len();
            let mut block = [0f32; 256];
            let mut src_units = StridedIndex::new(src.layout());
            for d in StridedIndex::new(&dst_layout) {
                for v in &mut block[..bl] {
                    let s = src_units
                        .next()
                        .ok_or_else(|| unsupported("copy", "mismatched unit counts".into()))?;
                    *v = r.get(s) as f32;
                }
                quant::quantize_row(dd, &block[..bl], w.unit_bytes(d))?;
            }
        }
        _ => {
            return Err(TensorError::DTypeMismatch {
                op: "copy",
                lhs: sd,
                rhs: dd,
            });
        }
    }
    Ok(())
}

pub(crate) fn quantize(src: &Tensor, out: &mut Tensor) -> Result<()> {
    let range = src
        .layout()
        .contiguous_range()
        .ok_or_else(|| unsupported("quantize", "a strided input".into()))?;
    let bytes = &src.storage().host_bytes()?[range.start * 4..range.end * 4];
    let values: Vec<f32> = bytemuck::pod_collect_to_vec(bytes); // any alignment
    let dtype = out.dtype();
    let out_range = out
        .layout()
        .contiguous_range()
        .ok_or_else(|| unsupported("quantize", "a strided output".into()))?;
    let bb = dtype.block_bytes();
    let dst = &mut out.host_slice_mut::<u8>()?[out_range.start * bb..out_range.end * bb];
    quant::quantize_row(dtype, &values, dst)
}
