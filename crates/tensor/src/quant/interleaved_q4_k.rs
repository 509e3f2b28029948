//! The row-interleaved Q4_K layout [`DType::Q4KR8`]: for each group of eight rows and
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
//! [`DType::Q4KR8`]: crate::DType::Q4KR8

use super::scale_min_k4::{K_SCALE_SIZE, pack_scale_min, scale_min};

/// Bytes of one record (eight rows, one super-block column).
pub const RECORD: usize = 1184;
/// Offset of the `d` values.
pub const D: usize = 0;
/// Offset of the `dmin` values.
pub const DMIN: usize = 16;
/// Offset of the per-chunk scales.
pub const SCALES: usize = 32;
/// Offset of the per-chunk mins.
pub const MINS: usize = 96;
/// Offset of the quants.
pub const QS: usize = 160;

/// Offset of the 32 quant bytes of chunk `j` (0..4), step `k` (0..8).
pub const fn qs_offset(j: usize, k: usize) -> usize {
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
/// unpacked (the layout both `Q4KR8` and `Q5KR8` records open with).
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
