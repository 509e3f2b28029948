//! The row-interleaved layouts [`DType::Q4_0R8`] and [`DType::Q8_0R8`]: eight weight
//! rows stored as one stream, so a kernel that computes eight outputs at once reads one
//! sequential run of memory instead of eight (decode reads the weights faster so), and
//! unpacks each weight block once for several activation rows (prefill). The functions
//! here are written for any 32-value format whose block is an f16 scale then quants.
//! [`DType::Q4KR8`], [`DType::Q5KR8`] and [`DType::Q6KR8`] have their own record
//! layouts (`interleaved_q4_k`, `interleaved_q5_k`, `interleaved_q6_k`);
//! `interleave_rows` and `deinterleave_rows` take any of them.
//!
//! Layout of an `[N, K]` tensor (`N` a multiple of 8, `nb = K / 32` blocks per row): for
//! each group `g` of rows `8g..8g + 8` and each block column `b`, a record of
//! `8 · block_bytes` bytes, records in `(g, b)` order:
//!
//! - the eight f16 block scales, in the lane order [`SCALE_ROW_ORDER`] (rows
//!   0, 2, 4, 6, 1, 3, 5, 7: the order a two-rows-per-vector `hadd` tree leaves the
//!   eight sums in, so the kernel multiplies without a permute);
//! - the eight rows' 16 quant bytes, rows in order 0..8.
//!
//! The bytes are those of the base format, only moved: the tensor has exactly the size
//! of the original and dequantizes to exactly the same values.

use std::ops::Range;

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// Rows per interleaved group.
pub const ROW_GROUP: usize = 8;

/// Scale slot `i` of a record holds the scale of row `SCALE_ROW_ORDER[i]` of the group.
pub const SCALE_ROW_ORDER: [usize; ROW_GROUP] = [0, 2, 4, 6, 1, 3, 5, 7];

/// Checks `rows × row_len` of the interleaved `dtype` against the byte lengths of its
/// base format's rows (`plain`) and of the interleaved layout (`packed`); returns
/// (blocks per row, base block bytes).
fn check(
    op: &'static str,
    dtype: DType,
    rows: usize,
    row_len: usize,
    plain: usize,
    packed: usize,
) -> Result<(usize, usize)> {
    if dtype.row_group() != ROW_GROUP {
        return Err(TensorError::DType {
            op,
            dtype,
            what: "a row-interleaved block format (q4_0_r8, q8_0_r8, q4_K_r8, q5_K_r8, q6_K_r8)",
        });
    }
    let base = dtype.base_format();
    if !rows.is_multiple_of(ROW_GROUP) || !row_len.is_multiple_of(base.block_len()) {
        return Err(TensorError::Argument {
            op,
            name: "shape",
            reason: format!(
                "[{rows}, {row_len}]: rows must be a multiple of {ROW_GROUP} and the row \
                 length of {}",
                base.block_len()
            ),
        });
    }
    let nb = row_len / base.block_len();
    for (len, format) in [(plain, base), (packed, dtype)] {
        let want = rows
            .checked_mul(nb)
            .and_then(|b| b.checked_mul(format.block_bytes()));
        if want != Some(len) {
            return Err(TensorError::Argument {
                op,
                name: "bytes",
                reason: format!(
                    "{len} bytes for [{rows}, {row_len}] of {format}, expected {want:?}"
                ),
            });
        }
    }
    Ok((nb, base.block_bytes()))
}

/// The slot of row `r` (0..8) of a group in the scale order.
pub(crate) fn scale_slot(r: usize) -> usize {
    SCALE_ROW_ORDER
        .iter()
        .position(|&row| row == r)
        .unwrap_or(0)
}

/// Where row `r`'s (0..8) f16 scale and quants of a `block_bytes`-byte legacy block lie
/// in a record: the scales first in scale order, then each row's quants.
fn places(r: usize, block_bytes: usize) -> (Range<usize>, Range<usize>) {
    let (s, n) = (2 * scale_slot(r), block_bytes - 2);
    let q = 2 * ROW_GROUP + r * n;
    (s..s + 2, q..q + n)
}

/// Writes row `r`'s (0..8) block of the base format of `dtype` (`block`, as GGUF stores
/// it) into its places in `record`, one record of `dtype` (`8 · block_bytes` bytes).
pub fn put_block(dtype: DType, r: usize, block: &[u8], record: &mut [u8]) {
    match dtype {
        DType::Q4KR8 => return super::interleaved_q4_k::put_block(r, block, record),
        DType::Q5KR8 => return super::interleaved_q5_k::put_block(r, block, record),
        DType::Q6KR8 => return super::interleaved_q6_k::put_block(r, block, record),
        _ => {}
    }
    let (scale, quants) = places(r, block.len());
    record[scale].copy_from_slice(&block[..2]);
    record[quants].copy_from_slice(&block[2..]);
}

/// Reads row `r`'s (0..8) block of the base format of `dtype` back out of `record`, one
/// record of `dtype`, into `block` (the base format's block size).
pub fn get_block(dtype: DType, r: usize, record: &[u8], block: &mut [u8]) {
    match dtype {
        DType::Q4KR8 => return super::interleaved_q4_k::get_block(r, record, block),
        DType::Q5KR8 => return super::interleaved_q5_k::get_block(r, record, block),
        DType::Q6KR8 => return super::interleaved_q6_k::get_block(r, record, block),
        _ => {}
    }
    let (scale, quants) = places(r, block.len());
    block[..2].copy_from_slice(&record[scale]);
    block[2..].copy_from_slice(&record[quants]);
}

/// Checks that a `linear` weight `w [N, K]` of a row-interleaved dtype is whole groups:
/// contiguous, `N` a multiple of 8, starting on a group (kernels read it by groups).
/// Any other dtype passes.
///
/// Errors: [`TensorError::Argument`] naming `op` and the weight.
pub fn check_interleaved_weight(op: &'static str, w: &Tensor) -> Result<()> {
    let group = w.dtype().row_group();
    if group == 1 {
        return Ok(());
    }
    let (n, k) = (w.dims()[0], w.dims().get(1).copied().unwrap_or(0));
    let group_units = (group * k / w.dtype().block_len()).max(1);
    if !w.layout().is_contiguous()
        || !n.is_multiple_of(group)
        || !w.layout().offset().is_multiple_of(group_units)
    {
        return Err(TensorError::Argument {
            op,
            name: "w",
            reason: format!(
                "a {} weight must be whole groups of {group} rows, contiguous",
                w.dtype()
            ),
        });
    }
    Ok(())
}

/// Interleaves `rows × row_len` values of the base format of `dtype` (`src`, rows as
/// GGUF stores them) into `dst` in `dtype`'s layout.
///
/// Errors: `dtype` is not an interleaved format, `rows` is not a multiple of 8, or a
/// byte length does not match the shape.
pub fn interleave_rows(
    dtype: DType,
    rows: usize,
    row_len: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<()> {
    let op = "interleave_rows";
    let (nb, bb) = check(op, dtype, rows, row_len, src.len(), dst.len())?;
    for_each_block(dtype, rows, nb, bb, |r, plain, record| {
        put_block(dtype, r, &src[plain..plain + bb], &mut dst[record]);
    });
    Ok(())
}

/// The inverse of [`interleave_rows`]: `src` in `dtype`'s layout back to rows of its
/// base format.
///
/// Errors: as [`interleave_rows`].
pub fn deinterleave_rows(
    dtype: DType,
    rows: usize,
    row_len: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<()> {
    let op = "deinterleave_rows";
    let (nb, bb) = check(op, dtype, rows, row_len, dst.len(), src.len())?;
    for_each_block(dtype, rows, nb, bb, |r, plain, record| {
        get_block(dtype, r, &src[record], &mut dst[plain..plain + bb]);
    });
    Ok(())
}

/// Calls `f(row in its group, offset of the block in the row-major bytes, byte range of
/// the record holding it)` for every block of `rows` rows of `nb` blocks of `bb` bytes.
fn for_each_block(
    dtype: DType,
    rows: usize,
    nb: usize,
    bb: usize,
    mut f: impl FnMut(usize, usize, std::ops::Range<usize>),
) {
    let record = ROW_GROUP * dtype.block_bytes();
    for r in 0..rows {
        for b in 0..nb {
            let at = ((r / ROW_GROUP) * nb + b) * record;
            f(r % ROW_GROUP, (r * nb + b) * bb, at..at + record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, quantize_row};

    #[test]
    fn round_trips_and_places_blocks_as_documented() {
        let (dtype, base) = (DType::Q4_0R8, DType::Q4_0);
        let (rows, k) = (16, 96);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3)
            .collect();
        let mut plain = vec![0u8; base.bytes_for(rows * k).unwrap()];
        quantize_row(base, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; plain.len()];
        interleave_rows(dtype, rows, k, &plain, &mut packed).unwrap();
        assert_ne!(packed, plain);
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(dtype, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain, "{dtype}");
        // Row 9 (group 1, lane 1), block 2: its scale is slot 4 of record (1, 2).
        let bb = base.block_bytes();
        let record = (3 + 2) * 8 * bb;
        let block = &plain[(9 * 3 + 2) * bb..(9 * 3 + 3) * bb];
        assert_eq!(&packed[record + 8..record + 10], &block[..2]);
        let q = record + 16 + (bb - 2);
        assert_eq!(&packed[q..q + bb - 2], &block[2..]);
        let mut vals_back = vec![0f32; rows * k];
        dequantize_row(base, &back, &mut vals_back).unwrap();
        assert!(vals_back.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn q4_k_round_trips_with_unpacked_scales() {
        use crate::quant::interleaved_q4_k::{D, DMIN, MINS, RECORD, SCALES, qs_offset};
        let (rows, k) = (16, 512);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; DType::Q4K.bytes_for(rows * k).unwrap()];
        quantize_row(DType::Q4K, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; DType::Q4KR8.bytes_for(rows * k).unwrap()];
        assert_eq!(packed.len(), plain.len() / 144 * 148);
        interleave_rows(DType::Q4KR8, rows, k, &plain, &mut packed).unwrap();
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(DType::Q4KR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
        // Row 11 (group 1, lane 3), super-block 1.
        let block = &plain[(11 * 2 + 1) * 144..(11 * 2 + 2) * 144];
        let record = (2 + 1) * RECORD;
        assert_eq!(&packed[record + D + 6..record + D + 8], &block[0..2]);
        assert_eq!(&packed[record + DMIN + 6..record + DMIN + 8], &block[2..4]);
        let packed_scales: &[u8; 12] = block[4..16].try_into().unwrap();
        for sub in 0..8 {
            let (sc, m) = super::super::scale_min_k4::scale_min(sub, packed_scales);
            let chunk = record + 16 * (sub / 2);
            assert_eq!(
                packed[chunk + SCALES + 8 * (sub % 2) + 3],
                sc,
                "sub-block {sub}"
            );
            assert_eq!(packed[chunk + MINS + 2 * 3 + sub % 2], m, "sub-block {sub}");
        }
        // Chunk 2, step 5: quant bytes 64 + 20 .. 64 + 24 of the row at lane 3.
        let q = record + qs_offset(2, 5) + 4 * 3;
        assert_eq!(&packed[q..q + 4], &block[16 + 64 + 20..16 + 64 + 24]);
    }

    #[test]
    fn q6_k_round_trips_with_lane_per_row_steps() {
        use crate::quant::interleaved_q6_k::{D, RECORD, SCALES, step_offset};
        let (rows, k) = (16, 512);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; DType::Q6K.bytes_for(rows * k).unwrap()];
        quantize_row(DType::Q6K, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; DType::Q6KR8.bytes_for(rows * k).unwrap()];
        assert_eq!(packed.len(), plain.len());
        interleave_rows(DType::Q6KR8, rows, k, &plain, &mut packed).unwrap();
        assert_ne!(packed, plain);
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(DType::Q6KR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
        // Row 13 (group 1, lane 5), super-block 1.
        let block = &plain[(13 * 2 + 1) * 210..(13 * 2 + 2) * 210];
        let record = (2 + 1) * RECORD;
        assert_eq!(&packed[record + D + 10..record + D + 12], &block[208..210]);
        for s in 0..16 {
            assert_eq!(
                packed[record + SCALES + 8 * s + 5],
                block[192 + s],
                "scale {s}"
            );
        }
        // Half 1, step 6: low bits ql[64 + 24..], ql[64 + 32 + 24..], high bits qh[32 + 24..].
        let at = record + step_offset(1, 6) + 4 * 5;
        assert_eq!(&packed[at..at + 4], &block[88..92]);
        assert_eq!(&packed[at + 32..at + 36], &block[120..124]);
        assert_eq!(&packed[at + 64..at + 68], &block[128 + 56..128 + 60]);
    }

    #[test]
    fn q5_k_round_trips_with_q4_k_steps_and_fifth_bit_runs() {
        use crate::quant::interleaved_q4_k::{MINS, SCALES};
        use crate::quant::interleaved_q5_k::{RECORD, qh_offset, qs_offset};
        let (rows, k) = (16, 512);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; DType::Q5K.bytes_for(rows * k).unwrap()];
        quantize_row(DType::Q5K, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; DType::Q5KR8.bytes_for(rows * k).unwrap()];
        assert_eq!(packed.len(), plain.len() / 176 * 180);
        interleave_rows(DType::Q5KR8, rows, k, &plain, &mut packed).unwrap();
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(DType::Q5KR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
        // Row 10 (group 1, lane 2), super-block 1.
        let block = &plain[(10 * 2 + 1) * 176..(10 * 2 + 2) * 176];
        let record = (2 + 1) * RECORD;
        assert_eq!(&packed[record + 4..record + 6], &block[0..2]);
        let packed_scales: &[u8; 12] = block[4..16].try_into().unwrap();
        for sub in 0..8 {
            let (sc, m) = super::super::scale_min_k4::scale_min(sub, packed_scales);
            let chunk = record + 16 * (sub / 2);
            assert_eq!(
                packed[chunk + SCALES + 8 * (sub % 2) + 2],
                sc,
                "sub-block {sub}"
            );
            assert_eq!(packed[chunk + MINS + 2 * 2 + sub % 2], m, "sub-block {sub}");
        }
        // Step 6: fifth bits qh[24..28]; chunk 3, step 6: nibbles qs[96 + 24..].
        let at = record + qh_offset(6) + 4 * 2;
        assert_eq!(&packed[at..at + 4], &block[16 + 24..16 + 28]);
        let at = record + qs_offset(3, 6) + 4 * 2;
        assert_eq!(&packed[at..at + 4], &block[48 + 96 + 24..48 + 96 + 28]);
    }

    #[test]
    fn rejects_bad_shapes_and_formats() {
        let mut dst = vec![0u8; 18 * 7];
        let src = vec![0u8; 18 * 7];
        assert!(interleave_rows(DType::Q4_0R8, 7, 32, &src, &mut dst).is_err());
        assert!(interleave_rows(DType::Q4_0, 8, 32, &src, &mut dst).is_err());
        assert!(interleave_rows(DType::Q4_0R8, 8, 32, &src, &mut dst).is_err());
        assert!(deinterleave_rows(DType::Q4_0R8, 8, 33, &src, &mut dst).is_err());
    }
}
