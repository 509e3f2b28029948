//! The record of [`InterleavedLayout::Q4KR8`] (Q4_K rows): for each group of eight rows and
//! each super-block column, one record of 1184 bytes (148 per row, 4 more than Q4_K's
//! 144: the 6-bit scales and mins are stored unpacked, one byte each). Everything is
//! arranged so that 32-bit lane `l` of a kernel's vectors belongs to row `l`:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..16 | the eight rows' `d` (f16), rows in order |
//! | 16..32 | the eight rows' `dmin` (f16), rows in order |
//! | 32..96 | per 64-value chunk `j` (0..4): 16 bytes, the eight rows' scales of sub-block `2j`, then those of sub-block `2j + 1` |
//! | 96..160 | per chunk `j`: 16 bytes, for each row the mins of sub-blocks `2j` and `2j + 1` (pairs, rows in order) |
//! | 160..1184 | per chunk `j` and step `k` (0..8): 32 bytes, row `l`'s four quant bytes `qs[32j + 4k ..][..4]` at `4l` |
//!
//! So the low nibbles of one 32-byte quant load are values `4k..4k + 4` of sub-block
//! `2j` of all eight rows and the high nibbles the same values of sub-block `2j + 1`
//! (Q4_K's own byte pairing, kept): against a 4-byte activation run broadcast to every
//! lane, `maddubs` gives each row's partial sums in its own lane, the eight steps of a
//! chunk add up in 16 bits, and one `madd` with the rows' sub-block scales (each byte
//! doubled to fill a lane's two 16-bit halves) finishes a sub-block for all eight rows:
//! no shuffle per sub-block and no horizontal sums.
//!
//! The bytes of the quants are those of Q4_K, only moved; the scales and mins are the
//! 6-bit values Q4_K packs into 12 bytes, so the record dequantizes to exactly the same
//! values.
//!
//! [`InterleavedLayout::Q4KR8`]: super::InterleavedLayout::Q4KR8

use tempra_tensor::quant::{K_SCALE_SIZE, pack_scale_min, scale_min};

/// Bytes of one record (eight rows, one super-block column).
pub(crate) const RECORD: usize = 1184;
/// Offset of the `d` values.
pub(crate) const D: usize = 0;
/// Offset of the `dmin` values.
pub(crate) const DMIN: usize = 16;
/// Offset of the per-chunk scales.
pub(crate) const SCALES: usize = 32;
/// Offset of the per-chunk mins.
pub(crate) const MINS: usize = 96;
/// Offset of the quants.
pub(crate) const QS: usize = 160;

/// Offset of the 32 quant bytes of chunk `j` (0..4), step `k` (0..8).
pub(crate) const fn qs_offset(j: usize, k: usize) -> usize {
    QS + (j * 8 + k) * 32
}

/// Offset of row `r`'s scale of sub-block `sub` (0..8).
const fn scale_offset(r: usize, sub: usize) -> usize {
    SCALES + 16 * (sub / 2) + 8 * (sub % 2) + r
}

/// Offset of row `r`'s min of sub-block `sub` (0..8).
const fn min_offset(r: usize, sub: usize) -> usize {
    MINS + 16 * (sub / 2) + 2 * r + sub % 2
}

/// Writes row `r`'s (0..8) Q4_K block (144 bytes) into its places in `record`.
pub(crate) fn put_block(r: usize, block: &[u8], record: &mut [u8]) {
    put_header(r, block, record);
    put_quants(r, &block[16..], QS, record);
}

/// Reads row `r`'s (0..8) Q4_K block (144 bytes) back out of `record`.
pub(crate) fn get_block(r: usize, record: &[u8], block: &mut [u8]) {
    get_header(r, record, block);
    get_quants(r, record, QS, &mut block[16..]);
}

/// Writes the first 16 bytes of row `r`'s Q4_K or Q5_K block (`d`, `dmin`, the packed
/// 6-bit scales and mins) into the record's first 160 bytes, the scales and mins
/// unpacked (the layout both Q4_K and Q5_K records open with).
pub(crate) fn put_header(r: usize, block: &[u8], record: &mut [u8]) {
    record[D + 2 * r..D + 2 * r + 2].copy_from_slice(&block[0..2]);
    record[DMIN + 2 * r..DMIN + 2 * r + 2].copy_from_slice(&block[2..4]);
    let packed: &[u8; K_SCALE_SIZE] = block[4..16].try_into().unwrap_or(&[0; K_SCALE_SIZE]);
    for sub in 0..8 {
        let (sc, m) = scale_min(sub, packed);
        record[scale_offset(r, sub)] = sc;
        record[min_offset(r, sub)] = m;
    }
}

/// The inverse of [`put_header`].
pub(crate) fn get_header(r: usize, record: &[u8], block: &mut [u8]) {
    block[0..2].copy_from_slice(&record[D + 2 * r..D + 2 * r + 2]);
    block[2..4].copy_from_slice(&record[DMIN + 2 * r..DMIN + 2 * r + 2]);
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for sub in 0..8 {
        scales[sub] = record[scale_offset(r, sub)];
        mins[sub] = record[min_offset(r, sub)];
    }
    block[4..16].copy_from_slice(&pack_scale_min(&scales, &mins));
}

/// Writes row `r`'s 128 nibble bytes `qs` into the record's steps from offset `base`
/// (per chunk `j` and step `k`, 32 bytes holding four bytes of each row).
pub(crate) fn put_quants(r: usize, qs: &[u8], base: usize, record: &mut [u8]) {
    for j in 0..4 {
        for k in 0..8 {
            let at = base - QS + qs_offset(j, k) + 4 * r;
            let from = 32 * j + 4 * k;
            record[at..at + 4].copy_from_slice(&qs[from..from + 4]);
        }
    }
}

/// The inverse of [`put_quants`].
pub(crate) fn get_quants(r: usize, record: &[u8], base: usize, qs: &mut [u8]) {
    for j in 0..4 {
        for k in 0..8 {
            let at = base - QS + qs_offset(j, k) + 4 * r;
            let to = 32 * j + 4 * k;
            qs[to..to + 4].copy_from_slice(&record[at..at + 4]);
        }
    }
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;
    use tempra_tensor::quant::{quantize_row, scale_min};

    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};

    #[test]
    fn q4_k_round_trips_with_unpacked_scales() {
        use super::{D, DMIN, MINS, RECORD, SCALES, qs_offset};
        let (rows, k) = (16, 512);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; DType::Q4K.bytes_for(rows * k).unwrap()];
        quantize_row(DType::Q4K, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; InterleavedLayout::Q4KR8.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len() / 144 * 148);
        interleave_rows(InterleavedLayout::Q4KR8, rows, k, &plain, &mut packed).unwrap();
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(InterleavedLayout::Q4KR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
        // Row 11 (group 1, lane 3), super-block 1.
        let block = &plain[(11 * 2 + 1) * 144..(11 * 2 + 2) * 144];
        let record = (2 + 1) * RECORD;
        assert_eq!(&packed[record + D + 6..record + D + 8], &block[0..2]);
        assert_eq!(&packed[record + DMIN + 6..record + DMIN + 8], &block[2..4]);
        let packed_scales: &[u8; 12] = block[4..16].try_into().unwrap();
        for sub in 0..8 {
            let (sc, m) = scale_min(sub, packed_scales);
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
}
