//! The row-interleaved Q4_K layout [`DType::Q4KR8`]: for each group of eight rows and
//! each super-block column, one record of 1184 bytes (148 per row, 4 more than Q4_K's
//! 144: the 6-bit scales and mins are stored unpacked, one byte each):
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..16 | the eight rows' `d` (f16), in the order [`SCALE_ROW_ORDER`](super::SCALE_ROW_ORDER) |
//! | 16..32 | the eight rows' `dmin` (f16), same order |
//! | 32..96 | per row pair `p` (rows `2p`, `2p + 1`): 16 bytes, the eight sub-block scales of row `2p` then those of row `2p + 1` |
//! | 96..160 | the same for the eight sub-block mins |
//! | 160..1184 | per row pair `p`, 64-value chunk `j` (0..4) and half `h` (0..2): 32 bytes, the 16 quant bytes `qs[32j + 16h ..][..16]` of row `2p` then of row `2p + 1` |
//!
//! So one 32-byte load holds the same 32 values of two rows (low nibbles: sub-block `2j`,
//! high: `2j + 1`), and the scales of a row pair widen to one vector whose 128-bit
//! halves belong to the two rows: what the AVX2 kernel multiplies against.
//!
//! [`DType::Q4KR8`]: crate::DType::Q4KR8

use super::interleaved::scale_slot;
use super::scale_min_k4::{K_SCALE_SIZE, pack_scale_min, scale_min};

/// Bytes of one record (eight rows, one super-block column).
pub const RECORD: usize = 1184;
/// Offset of the `d` values.
pub const D: usize = 0;
/// Offset of the `dmin` values.
pub const DMIN: usize = 16;
/// Offset of the per-pair scales.
pub const SCALES: usize = 32;
/// Offset of the per-pair mins.
pub const MINS: usize = 96;
/// Offset of the quants.
pub const QS: usize = 160;

/// Offset of the 32 quant bytes of row pair `p`, chunk `j`, half `h`.
pub const fn qs_offset(p: usize, j: usize, h: usize) -> usize {
    QS + ((p * 4 + j) * 2 + h) * 32
}

/// Writes row `r`'s (0..8) Q4_K block (144 bytes) into its places in `record`.
pub(crate) fn put_block(r: usize, block: &[u8], record: &mut [u8]) {
    let (p, half) = (r / 2, r % 2);
    let s = scale_slot(r);
    record[D + 2 * s..D + 2 * s + 2].copy_from_slice(&block[0..2]);
    record[DMIN + 2 * s..DMIN + 2 * s + 2].copy_from_slice(&block[2..4]);
    let packed: &[u8; K_SCALE_SIZE] = block[4..16].try_into().unwrap_or(&[0; K_SCALE_SIZE]);
    for sub in 0..8 {
        let (sc, m) = scale_min(sub, packed);
        record[SCALES + 16 * p + 8 * half + sub] = sc;
        record[MINS + 16 * p + 8 * half + sub] = m;
    }
    for j in 0..4 {
        for h in 0..2 {
            let at = qs_offset(p, j, h) + 16 * half;
            let from = 16 + 32 * j + 16 * h;
            record[at..at + 16].copy_from_slice(&block[from..from + 16]);
        }
    }
}

/// Reads row `r`'s (0..8) Q4_K block (144 bytes) back out of `record`.
pub(crate) fn get_block(r: usize, record: &[u8], block: &mut [u8]) {
    let (p, half) = (r / 2, r % 2);
    let s = scale_slot(r);
    block[0..2].copy_from_slice(&record[D + 2 * s..D + 2 * s + 2]);
    block[2..4].copy_from_slice(&record[DMIN + 2 * s..DMIN + 2 * s + 2]);
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for sub in 0..8 {
        scales[sub] = record[SCALES + 16 * p + 8 * half + sub];
        mins[sub] = record[MINS + 16 * p + 8 * half + sub];
    }
    block[4..16].copy_from_slice(&pack_scale_min(&scales, &mins));
    for j in 0..4 {
        for h in 0..2 {
            let at = qs_offset(p, j, h) + 16 * half;
            let to = 16 + 32 * j + 16 * h;
            block[to..to + 16].copy_from_slice(&record[at..at + 16]);
        }
    }
}
