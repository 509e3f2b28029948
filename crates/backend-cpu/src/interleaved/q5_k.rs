//! The record of [`InterleavedLayout::Q5KR8`] (Q5_K rows): for each group of eight rows and
//! each super-block column, one record of 1440 bytes (180 per row, 4 more than Q5_K's
//! 176: the 6-bit scales and mins unpacked, as in [`super::q4_k`]). 32-bit lane `l`
//! of a kernel's vectors belongs to row `l`:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..160 | `d`, `dmin`, scales and mins exactly as a Q4_K record's first 160 bytes |
//! | 160..416 | per step `k` (0..8): 32 bytes, row `l`'s four fifth-bit bytes `qh[4k..][..4]` at `4l` |
//! | 416..1440 | per chunk `j` (0..4) and step `k` (0..8): 32 bytes, row `l`'s four nibble bytes `qs[32j + 4k ..][..4]` at `4l` |
//!
//! Step `k` of chunk `j` is then a Q4_K record's step (low nibbles: values `64j + 4k ..` of
//! sub-block `2j`, high nibbles: the same positions of sub-block `2j + 1`) with the fifth
//! bits in bits `2j` and `2j + 1` of the step's `qh` run (Q5_K's own packing: `qh[l]`
//! holds the fifth bit of value `32i + l` in bit `i`).
//!
//! The bytes are those of Q5_K, only moved, with the scales and mins unpacked, so the
//! record dequantizes to exactly the same values.
//!
//! [`InterleavedLayout::Q5KR8`]: super::InterleavedLayout::Q5KR8

use super::q4_k::{get_header, get_quants, put_header, put_quants};

/// Bytes of one record (eight rows, one super-block column).
pub(crate) const RECORD: usize = 1440;
/// Offset of the fifth-bit runs.
pub(crate) const QH: usize = 160;
/// Offset of the nibble steps.
pub(crate) const QS: usize = 416;

/// Offset of the 32 fifth-bit bytes of step `k` (0..8).
pub(crate) const fn qh_offset(k: usize) -> usize {
    QH + 32 * k
}

/// Offset of the 32 nibble bytes of chunk `j` (0..4), step `k` (0..8).
pub(crate) const fn qs_offset(j: usize, k: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;
    use tempra_tensor::quant::{quantize_row, scale_min};

    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};

    #[test]
    fn q5_k_round_trips_with_q4_k_steps_and_fifth_bit_runs() {
        use super::super::q4_k::{MINS, SCALES};
        use super::{RECORD, qh_offset, qs_offset};
        let (rows, k) = (16, 512);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; DType::Q5K.bytes_for(rows * k).unwrap()];
        quantize_row(DType::Q5K, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; InterleavedLayout::Q5KR8.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len() / 176 * 180);
        interleave_rows(InterleavedLayout::Q5KR8, rows, k, &plain, &mut packed).unwrap();
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(InterleavedLayout::Q5KR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
        // Row 10 (group 1, lane 2), super-block 1.
        let block = &plain[(10 * 2 + 1) * 176..(10 * 2 + 2) * 176];
        let record = (2 + 1) * RECORD;
        assert_eq!(&packed[record + 4..record + 6], &block[0..2]);
        let packed_scales: &[u8; 12] = block[4..16].try_into().unwrap();
        for sub in 0..8 {
            let (sc, m) = scale_min(sub, packed_scales);
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
}
