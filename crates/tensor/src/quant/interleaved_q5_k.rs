//! The row-interleaved Q5_K layout [`DType::Q5KR8`]: for each group of eight rows and
//! each super-block column, one record of 1440 bytes (180 per row, 4 more than Q5_K's
//! 176: the 6-bit scales and mins unpacked, as in `interleaved_q4_k`). 32-bit lane `l`
//! of a kernel's vectors belongs to row `l`:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..160 | `d`, `dmin`, scales and mins exactly as a `Q4KR8` record's first 160 bytes |
//! | 160..416 | per step `k` (0..8): 32 bytes, row `l`'s four fifth-bit bytes `qh[4k..][..4]` at `4l` |
//! | 416..1440 | per chunk `j` (0..4) and step `k` (0..8): 32 bytes, row `l`'s four nibble bytes `qs[32j + 4k ..][..4]` at `4l` |
//!
//! Step `k` of chunk `j` is then Q4KR8's step (low nibbles: values `64j + 4k ..` of
//! sub-block `2j`, high nibbles: the same positions of sub-block `2j + 1`) with the fifth
//! bits in bits `2j` and `2j + 1` of the step's `qh` run (Q5_K's own packing: `qh[l]`
//! holds the fifth bit of value `32i + l` in bit `i`).
//!
//! The bytes are those of Q5_K, only moved, with the scales and mins unpacked, so the
//! record dequantizes to exactly the same values.
//!
//! [`DType::Q5KR8`]: crate::DType::Q5KR8

use super::interleaved_q4_k::{get_header, get_quants, put_header, put_quants};

pub use super::interleaved_q4_k::{D, DMIN, MINS, SCALES};

/// Bytes of one record (eight rows, one super-block column).
pub const RECORD: usize = 1440;
/// Offset of the fifth-bit runs.
pub const QH: usize = 160;
/// Offset of the nibble steps.
pub const QS: usize = 416;

/// Offset of the 32 fifth-bit bytes of step `k` (0..8).
pub const fn qh_offset(k: usize) -> usize {
    QH + 32 * k
}

/// Offset of the 32 nibble bytes of chunk `j` (0..4), step `k` (0..8).
pub const fn qs_offset(j: usize, k: usize) -> usize {
    QS + (j * 8 + k) * 32
}

/// Offsets inside a Q5_K block (176 bytes): the fifth bits, the nibbles.
const BLOCK_QH: usize = 16;
const BLOCK_QS: usize = 48;

/// Writes row `r`'s (0..8) Q5_K block (176 bytes) into its places in `record`.
pub(crate) fn put_block(r: usize, block: &[u8], record: &mut [u8]) {
    put_header(r, block, record);
    for k in 0..8 {
        let at = qh_offset(k) + 4 * r;
        record[at..at + 4].copy_from_slice(&block[BLOCK_QH + 4 * k..BLOCK_QH + 4 * k + 4]);
    }
    put_quants(r, &block[BLOCK_QS..], QS, record);
}

/// Reads row `r`'s (0..8) Q5_K block (176 bytes) back out of `record`.
pub(crate) fn get_block(r: usize, record: &[u8], block: &mut [u8]) {
    get_header(r, record, block);
    for k in 0..8 {
        let at = qh_offset(k) + 4 * r;
        block[BLOCK_QH + 4 * k..BLOCK_QH + 4 * k + 4].copy_from_slice(&record[at..at + 4]);
    }
    get_quants(r, record, QS, &mut block[BLOCK_QS..]);
}
