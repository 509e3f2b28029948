//! The record of [`InterleavedLayout::Q8_0R8`] (written for any 32-value format whose
//! block is an f16 scale then quants): for each
//! group of eight rows and each block column, `8 · block_bytes` bytes:
//!
//! - the eight f16 block scales, in the lane order [`SCALE_ROW_ORDER`] (rows
//!   0, 2, 4, 6, 1, 3, 5, 7: the order a two-rows-per-vector `hadd` tree leaves the
//!   eight sums in, so the kernel multiplies without a permute);
//! - the eight rows' quant bytes, rows in order 0..8.
//!
//! The bytes are those of the format, only moved: the layout has exactly the size of
//! the original.
//!
//! [`InterleavedLayout::Q8_0R8`]: super::InterleavedLayout::Q8_0R8

use std::ops::Range;

use super::ROW_GROUP;

/// Scale slot `i` of a record holds the scale of row `SCALE_ROW_ORDER[i]` of the group.
pub(crate) const SCALE_ROW_ORDER: [usize; ROW_GROUP] = [0, 2, 4, 6, 1, 3, 5, 7];

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

/// Writes row `r`'s (0..8) block (`block`, as GGUF stores it) into its places in
/// `record`.
pub(crate) fn put_block(r: usize, block: &[u8], record: &mut [u8]) {
    let (scale, quants) = places(r, block.len());
    record[scale].copy_from_slice(&block[..2]);
    record[quants].copy_from_slice(&block[2..]);
}

/// Reads row `r`'s (0..8) block back out of `record` into `block` (the format's block
/// size).
pub(crate) fn get_block(r: usize, record: &[u8], block: &mut [u8]) {
    let (scale, quants) = places(r, block.len());
    block[..2].copy_from_slice(&record[scale]);
    block[2..].copy_from_slice(&record[quants]);
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;
    use tempra_tensor::quant::{dequantize_row, quantize_row};

    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};

    #[test]
    fn round_trips_and_places_blocks_as_documented() {
        let (layout, base) = (InterleavedLayout::Q8_0R8, DType::Q8_0);
        let (rows, k) = (16, 96);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3)
            .collect();
        let mut plain = vec![0u8; base.bytes_for(rows * k).unwrap()];
        quantize_row(base, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; plain.len()];
        interleave_rows(layout, rows, k, &plain, &mut packed).unwrap();
        assert_ne!(packed, plain);
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(layout, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain, "{layout}");
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
}
