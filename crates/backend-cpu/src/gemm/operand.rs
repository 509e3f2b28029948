//! A strided matrix operand of a product: F32, F16 or BF16 values in host memory,
//! addressed by an element offset and a row and a column stride.

use std::ops::Range;

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use tempra_tensor::DType;

use super::pack::PackOps;
use crate::interleaved::InterleavedLayout;
use crate::prefetch::prefetch;

/// The values behind an operand, in their stored dtype.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Values<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// IEEE half values, converted while packing.
    F16(&'a [f16]),
    /// bfloat16 values, converted while packing.
    BF16(&'a [bf16]),
    /// Block-quantized rows (a GGUF weight `w [N, K]` read as `B = wᵀ`), dequantized while
    /// packing. Element indices are virtual: element `v` is value `v % block_len` of
    /// block `base_block + v / block_len`, so with `rs = 1` and `cs = row_stride_blocks ·
    /// block_len` element `(k, n)` is `w[n, k]`. Only `pack_panels` reads this variant,
    /// in runs that start on a block boundary and cover whole blocks. A prepared weight
    /// (rows interleaved by eight) is addressed the same way, as if its rows were stored
    /// one after another; each block is gathered from its group's record.
    Blocks {
        /// The block format.
        dtype: DType,
        /// The storage's bytes (a prepared weight's from its first group on).
        bytes: &'a [u8],
        /// The block holding `w[0, 0]` (0 for a prepared weight).
        base_block: usize,
        /// Blocks per weight row (where an interleaved weight's rows start).
        row_blocks: usize,
        /// The interleaved layout of a prepared weight, `None` for row-major blocks.
        interleaved: Option<InterleavedLayout>,
    },
}

/// A matrix view: element `(i, j)` lives at `values[offset + i * rs + j * cs]`.
///
/// The exec layer checked that every addressed element lies inside the storage; the
/// packing code indexes with bounds checks all the same (a bad layout panics rather than
/// reading out of bounds).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatRef<'a> {
    pub(crate) values: Values<'a>,
    pub(crate) offset: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl<'a> MatRef<'a> {
    /// The view moved to start at element `(i, j)`.
    pub(crate) fn at(self, i: usize, j: usize) -> Self {
        Self {
            offset: self.offset + i * self.rs + j * self.cs,
            ..self
        }
    }

    /// Reads `out.len()` values starting at element `start` (relative to the offset),
    /// `stride` elements apart, converted to f32.
    #[inline]
    pub(crate) fn load_run(&self, ops: PackOps, start: usize, stride: usize, out: &mut [f32]) {
        let first = self.offset + start;
        let n = out.len();
        if n == 0 {
            return;
        }
        match self.values {
            Values::F32(v) if stride == 1 => out.copy_from_slice(&v[first..first + n]),
            Values::F16(v) if stride == 1 => match ops.f16_to_f32 {
                // SAFETY: `ops` holds the helper only where its features were detected.
                Some(convert) => unsafe { convert(&v[first..first + n], out) },
                None => v[first..first + n].convert_to_f32_slice(out),
            },
            Values::BF16(v) if stride == 1 => v[first..first + n].convert_to_f32_slice(out),
            Values::F32(v) => {
                let _ = v[first + (n - 1) * stride];
                for (e, o) in out.iter_mut().enumerate() {
                    *o = v[first + e * stride];
                }
            }
            Values::F16(v) => {
                for (e, o) in out.iter_mut().enumerate() {
                    *o = v[first + e * stride].to_f32();
                }
            }
            Values::BF16(v) => {
                for (e, o) in out.iter_mut().enumerate() {
                    *o = v[first + e * stride].to_f32();
                }
            }
            Values::Blocks {
                dtype,
                bytes,
                base_block,
                row_blocks,
                interleaved,
            } => {
                // Whole blocks along a row (the only way packing reads this variant).
                let bl = dtype.block_len();
                debug_assert!(stride == 1 && first.is_multiple_of(bl) && n.is_multiple_of(bl));
                if let Some(layout) = interleaved {
                    let first_block = base_block + first / bl;
                    return load_interleaved(ops, layout, bytes, first_block, row_blocks, out);
                }
                let src = &bytes[block_bytes(dtype, base_block, first, n)];
                match ops.dequantize {
                    // SAFETY: `ops` holds the helper only where its features were detected.
                    Some(dequantize) => unsafe { dequantize(dtype, src, out) },
                    None => super::dequant::dequantize_blocks(dtype, src, out),
                }
            }
        }
    }
}

impl MatRef<'_> {
    /// Asks the cache for the source memory of the run of `len` values from element
    /// `start` (relative to the offset) along unit stride: a hint, nothing out of range.
    pub(crate) fn prefetch_run(&self, start: usize, len: usize) {
        let first = self.offset + start;
        match self.values {
            Values::F32(v) => (0..len).step_by(16).for_each(|e| prefetch(v, first + e)),
            Values::F16(v) => (0..len).step_by(32).for_each(|e| prefetch(v, first + e)),
            Values::BF16(v) => (0..len).step_by(32).for_each(|e| prefetch(v, first + e)),
            Values::Blocks {
                dtype,
                bytes,
                base_block,
                row_blocks,
                interleaved: Some(layout),
            } => {
                // One hint per block: each lies in another record.
                let (bl, first_block) = (dtype.block_len(), base_block + first / dtype.block_len());
                for v in first_block..first_block + len.div_ceil(bl) {
                    let (record, _) = layout.place(v, row_blocks);
                    prefetch(bytes, record.start);
                }
            }
            Values::Blocks {
                dtype,
                bytes,
                base_block,
                ..
            } => block_bytes(dtype, base_block, first, len)
                .step_by(64)
                .for_each(|e| prefetch(bytes, e)),
        }
    }
}

/// Dequantizes `out.len() / block_len` blocks of a weight in `layout` from block
/// `first_block` on (one row's run): the blocks are gathered back to their format
/// into a stack buffer, a chunk at a time, and each chunk dequantized in one call as
/// that format is (a chunk spreads each call's fixed work over many blocks: Q8_0 prefill
/// ran faster chunked than with one call per block).
fn load_interleaved(
    ops: PackOps,
    layout: InterleavedLayout,
    bytes: &[u8],
    first_block: usize,
    row_blocks: usize,
    out: &mut [f32],
) {
    let base = layout.format();
    let (bl, bb) = (base.block_len(), base.block_bytes());
    let mut gathered = [0u8; 4096];
    let per_chunk = (gathered.len() / bb).max(1);
    for (c, values) in out.chunks_mut(per_chunk * bl).enumerate() {
        let blocks = values.len() / bl;
        for (i, block) in gathered.chunks_exact_mut(bb).take(blocks).enumerate() {
            let (record, row) = layout.place(first_block + c * per_chunk + i, row_blocks);
            layout.get_block(row, &bytes[record], block);
        }
        let src = &gathered[..blocks * bb];
        match ops.dequantize {
            // SAFETY: `ops` holds the helper only where its features were detected.
            Some(dequantize) => unsafe { dequantize(base, src, values) },
            None => super::dequant::dequantize_blocks(base, src, values),
        }
    }
}

/// The bytes of the blocks holding elements `first..first + n` of a `Values::Blocks`
/// whose element 0 is block `base_block`.
fn block_bytes(dtype: DType, base_block: usize, first: usize, n: usize) -> Range<usize> {
    let bl = dtype.block_len();
    let start = (base_block + first / bl) * dtype.block_bytes();
    start..start + n.div_ceil(bl) * dtype.block_bytes()
}
