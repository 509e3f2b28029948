//! The CPU's prepared weight layouts: block rows interleaved in groups of eight, so a
//! kernel that computes eight outputs at once reads one sequential run of memory instead
//! of eight (decode reads the weights faster so), and unpacks each weight block once for
//! several activation rows (prefill). `prepare_weight` makes them at load
//! ([`InterleavedWeight`], a [`tempra_tensor::PreparedStorage`]); the tensor over one
//! keeps its file's dtype, and only this backend's `linear` reads the layout.
//!
//! A weight `[N, K]` (`N` a multiple of 8, `nb = K / block_len` blocks per row) is, for
//! each group `g` of rows `8g..8g + 8` and each block column `b`, one record holding the
//! eight rows' blocks of column `b`; records in `(g, b)` order. The record of each
//! layout is described in its module: `legacy` (Q8_0: the bytes only moved), `q4_k` and
//! `q5_k` (the 6-bit scales and mins unpacked, 4 bytes more per row and block), `q6_k`
//! (the bytes only moved), `iq4` (IQ4_NL and Q4_0: the bytes only moved; IQ4_XS: the
//! 6-bit scales unpacked, 2 bytes more per row and block), `mxfp4` (the bytes only moved,
//! in IQ4_NL's runs), `ternary` (TQ2_0: the bytes only moved; TQ1_0: recoded as TQ2_0,
//! 12 bytes more per row and block). Every record converts back to the format's blocks
//! ([`deinterleave_rows`]: exactly the original bytes, TQ1_0's as ggml's quantizer packs
//! its digits), so a prepared weight dequantizes to exactly the values of the original.

pub(crate) mod iq4;
pub(crate) mod legacy;
pub(crate) mod mxfp4;
pub(crate) mod q4_k;
pub(crate) mod q5_k;
pub(crate) mod q6_k;
pub(crate) mod ternary;
mod weight;

use std::fmt;
use std::ops::Range;

use tempra_tensor::{DType, Result, TensorError};

pub use weight::InterleavedWeight;

/// Copies row `r`'s block between a record and the format's block (`put_block`:
/// block → record, `get_block`: record → block).
type BlockCopy = fn(usize, &[u8], &mut [u8]);

/// Rows per interleaved group.
pub const ROW_GROUP: usize = 8;

/// A row-interleaved layout of one block format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InterleavedLayout {
    /// Q4_0 rows in [`InterleavedLayout::Iq4NlR8`]'s record (the blocks pair their
    /// nibbles alike): the eight f16 scales, then the quants in two runs of eight bytes
    /// per row.
    Q4_0R8,
    /// Q8_0 rows: per record the eight f16 scales (rows 0, 2, 4, 6, 1, 3, 5, 7), then
    /// the eight rows' 32 quant bytes in row order (rows `2p` and `2p + 1` are 64
    /// contiguous bytes: one 512-bit load).
    Q8_0R8,
    /// Q4_K rows, the 6-bit scales and mins unpacked (148 bytes per row and
    /// super-block), every 32-bit lane of a kernel's vector one row.
    Q4KR8,
    /// Q5_K rows: [`InterleavedLayout::Q4KR8`]'s record plus the fifth bits (180 bytes
    /// per row and super-block).
    Q5KR8,
    /// Q6_K rows (210 bytes per row and super-block, moved so that each 32-bit lane of a
    /// kernel's vector is one row).
    Q6KR8,
    /// IQ4_NL rows: the eight f16 scales, then the quants in two runs of eight bytes per
    /// row, so that each 64-bit lane of a kernel's vector is one row.
    Iq4NlR8,
    /// IQ4_XS rows, the 6-bit sub-block scales unpacked to signed bytes (138 bytes per
    /// row and super-block), each sub-block's quants in [`InterleavedLayout::Iq4NlR8`]'s
    /// runs.
    Iq4XsR8,
    /// MXFP4 rows: the eight E8M0 exponents, then the quants in
    /// [`InterleavedLayout::Iq4NlR8`]'s runs.
    Mxfp4R8,
    /// TQ1_0 rows recoded as TQ2_0's 2-bit codes (66 bytes per row and super-block for
    /// TQ1_0's 54), in [`InterleavedLayout::Tq2_0R8`]'s record.
    Tq1_0R8,
    /// TQ2_0 rows: the eight f16 scales, then the codes in steps of four bytes per row,
    /// so that each 32-bit lane of a kernel's vector is one row.
    Tq2_0R8,
}

impl InterleavedLayout {
    /// Every layout, in the order of the kernel tables.
    pub const ALL: [InterleavedLayout; 10] = [
        InterleavedLayout::Q4_0R8,
        InterleavedLayout::Q8_0R8,
        InterleavedLayout::Q4KR8,
        InterleavedLayout::Q5KR8,
        InterleavedLayout::Q6KR8,
        InterleavedLayout::Iq4NlR8,
        InterleavedLayout::Iq4XsR8,
        InterleavedLayout::Mxfp4R8,
        InterleavedLayout::Tq1_0R8,
        InterleavedLayout::Tq2_0R8,
    ];

    /// The interleaved layout of the block format `format`, if it has one.
    pub const fn of(format: DType) -> Option<InterleavedLayout> {
        match format {
            DType::Q4_0 => Some(InterleavedLayout::Q4_0R8),
            DType::Q8_0 => Some(InterleavedLayout::Q8_0R8),
            DType::Q4K => Some(InterleavedLayout::Q4KR8),
            DType::Q5K => Some(InterleavedLayout::Q5KR8),
            DType::Q6K => Some(InterleavedLayout::Q6KR8),
            DType::IQ4NL => Some(InterleavedLayout::Iq4NlR8),
            DType::IQ4XS => Some(InterleavedLayout::Iq4XsR8),
            DType::MXFP4 => Some(InterleavedLayout::Mxfp4R8),
            DType::TQ1_0 => Some(InterleavedLayout::Tq1_0R8),
            DType::TQ2_0 => Some(InterleavedLayout::Tq2_0R8),
            _ => None,
        }
    }

    /// The block format whose rows this layout holds.
    pub const fn format(self) -> DType {
        match self {
            InterleavedLayout::Q4_0R8 => DType::Q4_0,
            InterleavedLayout::Q8_0R8 => DType::Q8_0,
            InterleavedLayout::Q4KR8 => DType::Q4K,
            InterleavedLayout::Q5KR8 => DType::Q5K,
            InterleavedLayout::Q6KR8 => DType::Q6K,
            InterleavedLayout::Iq4NlR8 => DType::IQ4NL,
            InterleavedLayout::Iq4XsR8 => DType::IQ4XS,
            InterleavedLayout::Mxfp4R8 => DType::MXFP4,
            InterleavedLayout::Tq1_0R8 => DType::TQ1_0,
            InterleavedLayout::Tq2_0R8 => DType::TQ2_0,
        }
    }

    /// The layout's name (`q4_0_r8`, `q4_K_r8`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            InterleavedLayout::Q4_0R8 => "q4_0_r8",
            InterleavedLayout::Q8_0R8 => "q8_0_r8",
            InterleavedLayout::Q4KR8 => "q4_K_r8",
            InterleavedLayout::Q5KR8 => "q5_K_r8",
            InterleavedLayout::Q6KR8 => "q6_K_r8",
            InterleavedLayout::Iq4NlR8 => "iq4_nl_r8",
            InterleavedLayout::Iq4XsR8 => "iq4_xs_r8",
            InterleavedLayout::Mxfp4R8 => "mxfp4_r8",
            InterleavedLayout::Tq1_0R8 => "tq1_0_r8",
            InterleavedLayout::Tq2_0R8 => "tq2_0_r8",
        }
    }

    /// Bytes of one record: eight rows' blocks of one block column.
    pub const fn record_bytes(self) -> usize {
        match self {
            InterleavedLayout::Q4KR8 => q4_k::RECORD,
            InterleavedLayout::Q5KR8 => q5_k::RECORD,
            InterleavedLayout::Q6KR8 => q6_k::RECORD,
            InterleavedLayout::Q4_0R8 | InterleavedLayout::Iq4NlR8 => iq4::NL_RECORD,
            InterleavedLayout::Iq4XsR8 => iq4::XS_RECORD,
            InterleavedLayout::Mxfp4R8 => mxfp4::RECORD,
            InterleavedLayout::Tq1_0R8 | InterleavedLayout::Tq2_0R8 => ternary::RECORD,
            other => ROW_GROUP * other.format().block_bytes(),
        }
    }

    /// Bytes of `rows × k` values in this layout, or `None` when `rows` is not whole
    /// groups, `k` not whole blocks, or the size overflows.
    pub const fn bytes_for(self, rows: usize, k: usize) -> Option<usize> {
        let bl = self.format().block_len();
        if !rows.is_multiple_of(ROW_GROUP) || !k.is_multiple_of(bl) {
            return None;
        }
        match (rows / ROW_GROUP).checked_mul(k / bl) {
            Some(records) => records.checked_mul(self.record_bytes()),
            None => None,
        }
    }

    /// The position of this layout in [`InterleavedLayout::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// Writes row `r`'s (0..8) block of the format (`block`, as GGUF stores it) into its
    /// places in `record`, one record of this layout.
    pub(crate) fn put_block(self, r: usize, block: &[u8], record: &mut [u8]) {
        (self.record_code().0)(r, block, record)
    }

    /// Reads row `r`'s (0..8) block of the format back out of `record`, one record of
    /// this layout, into `block` (the format's block size).
    pub(crate) fn get_block(self, r: usize, record: &[u8], block: &mut [u8]) {
        (self.record_code().1)(r, record, block)
    }

    /// The record module's `put_block` and `get_block`.
    fn record_code(self) -> (BlockCopy, BlockCopy) {
        match self {
            InterleavedLayout::Q8_0R8 => (legacy::put_block, legacy::get_block),
            InterleavedLayout::Q4_0R8 | InterleavedLayout::Iq4NlR8 => {
                (iq4::put_nl_block, iq4::get_nl_block)
            }
            InterleavedLayout::Q4KR8 => (q4_k::put_block, q4_k::get_block),
            InterleavedLayout::Q5KR8 => (q5_k::put_block, q5_k::get_block),
            InterleavedLayout::Q6KR8 => (q6_k::put_block, q6_k::get_block),
            InterleavedLayout::Iq4XsR8 => (iq4::put_xs_block, iq4::get_xs_block),
            InterleavedLayout::Mxfp4R8 => (mxfp4::put_block, mxfp4::get_block),
            InterleavedLayout::Tq1_0R8 => (ternary::put_tq1_block, ternary::get_tq1_block),
            InterleavedLayout::Tq2_0R8 => (ternary::put_tq2_block, ternary::get_tq2_block),
        }
    }

    /// Where block `v` of a `[rows, row_blocks · block_len]` weight lies, `v` counted as
    /// if the rows were stored one after another: the bytes of its group's record and
    /// its row within the group.
    pub(crate) fn place(self, v: usize, row_blocks: usize) -> (Range<usize>, usize) {
        let (row, b) = (v / row_blocks.max(1), v % row_blocks.max(1));
        let record = self.record_bytes();
        let start = ((row / ROW_GROUP) * row_blocks + b) * record;
        (start..start + record, row % ROW_GROUP)
    }

    /// Checks `rows × row_len` against the byte lengths of the format's rows (`plain`)
    /// and of this layout (`packed`); returns (blocks per row, format block bytes).
    fn check(
        self,
        op: &'static str,
        rows: usize,
        row_len: usize,
        plain: usize,
        packed: usize,
    ) -> Result<(usize, usize)> {
        let format = self.format();
        let Some(want_packed) = self.bytes_for(rows, row_len) else {
            return Err(TensorError::Argument {
                op,
                name: "shape",
                reason: format!(
                    "[{rows}, {row_len}]: rows must be a multiple of {ROW_GROUP} and the row \
                     length of {}",
                    format.block_len()
                ),
            });
        };
        let want_plain = format.bytes_for(rows * row_len);
        for (len, want, what) in [
            (plain, want_plain, format.name()),
            (packed, Some(want_packed), self.name()),
        ] {
            if want != Some(len) {
                return Err(TensorError::Argument {
                    op,
                    name: "bytes",
                    reason: format!(
                        "{len} bytes for [{rows}, {row_len}] of {what}, expected {want:?}"
                    ),
                });
            }
        }
        Ok((row_len / format.block_len(), format.block_bytes()))
    }

    /// Calls `f(row in its group, offset of the block in the row-major bytes, byte range
    /// of the record holding it)` for every block of `rows` rows of `nb` blocks of `bb`
    /// bytes.
    fn for_each_block(
        self,
        rows: usize,
        nb: usize,
        bb: usize,
        mut f: impl FnMut(usize, usize, Range<usize>),
    ) {
        for r in 0..rows {
            for b in 0..nb {
                let (record, lane) = self.place(r * nb + b, nb);
                f(lane, (r * nb + b) * bb, record);
            }
        }
    }
}

impl fmt::Display for InterleavedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Interleaves `rows × row_len` values of `layout`'s format (`src`, rows as GGUF stores
/// them) into `dst` in `layout`.
///
/// Errors: `rows` is not a multiple of 8, `row_len` not whole blocks, or a byte length
/// does not match the shape.
pub fn interleave_rows(
    layout: InterleavedLayout,
    rows: usize,
    row_len: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<()> {
    let (nb, bb) = layout.check("interleave_rows", rows, row_len, src.len(), dst.len())?;
    layout.for_each_block(rows, nb, bb, |r, plain, record| {
        layout.put_block(r, &src[plain..plain + bb], &mut dst[record]);
    });
    Ok(())
}

/// The inverse of [`interleave_rows`]: `src` in `layout` back to rows of its format.
///
/// Errors: as [`interleave_rows`].
pub fn deinterleave_rows(
    layout: InterleavedLayout,
    rows: usize,
    row_len: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<()> {
    let (nb, bb) = layout.check("deinterleave_rows", rows, row_len, dst.len(), src.len())?;
    layout.for_each_block(rows, nb, bb, |r, plain, record| {
        layout.get_block(r, &src[record], &mut dst[plain..plain + bb]);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use tempra_tensor::quant::{dequantize_row, quantize_row};

    use super::*;

    /// `rows × k` test values of `format`, quantized.
    pub(super) fn quantized_rows(format: DType, rows: usize, k: usize) -> Vec<u8> {
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; format.bytes_for(rows * k).unwrap()];
        quantize_row(format, &vals, &mut plain).unwrap();
        plain
    }

    #[test]
    fn every_layout_round_trips_and_dequantizes_the_same() {
        for layout in InterleavedLayout::ALL {
            let format = layout.format();
            assert_eq!(InterleavedLayout::of(format), Some(layout));
            let (rows, k) = (16, 512);
            let plain = quantized_rows(format, rows, k);
            let mut packed = vec![0u8; layout.bytes_for(rows, k).unwrap()];
            interleave_rows(layout, rows, k, &plain, &mut packed).unwrap();
            let mut back = vec![0u8; plain.len()];
            deinterleave_rows(layout, rows, k, &packed, &mut back).unwrap();
            assert_eq!(back, plain, "{layout}");
            let (mut a, mut b) = (vec![0f32; rows * k], vec![0f32; rows * k]);
            dequantize_row(format, &plain, &mut a).unwrap();
            dequantize_row(format, &back, &mut b).unwrap();
            assert_eq!(a, b, "{layout}");
        }
    }

    #[test]
    fn rejects_bad_shapes() {
        let mut dst = vec![0u8; 18 * 7];
        let src = vec![0u8; 18 * 7];
        let layout = InterleavedLayout::Q4_0R8;
        assert!(interleave_rows(layout, 7, 32, &src, &mut dst).is_err());
        assert!(interleave_rows(layout, 8, 32, &src, &mut dst).is_err());
        assert!(deinterleave_rows(layout, 8, 33, &src, &mut dst).is_err());
        assert_eq!(layout.bytes_for(7, 32), None);
        assert_eq!(
            InterleavedLayout::Q4KR8.bytes_for(16, 512),
            Some(2 * 2 * 1184)
        );
    }
}
