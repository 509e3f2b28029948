//! The record of [`InterleavedLayout::Mxfp4R8`] (MXFP4 rows): IQ4_NL's runs (see
//! `iq4`) after the eight rows' E8M0 exponents. MXFP4 pairs its nibbles as IQ4_NL does
//! (byte `i` of a block holds value `i` low and `16 + i` high), so its quants take the
//! same runs and the same one-shuffle-per-run products, with the doubled E2M1 levels as
//! the codebook; the exponents stay bytes (136 bytes per record, the size of the eight
//! blocks), which the kernels turn into f32 scales exactly as `e8m0_to_f32_half` does.
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..8 | the eight rows' `e` (E8M0), rows in order |
//! | 8..136 | runs `p` (0..2) of the block's quants |
//!
//! [`InterleavedLayout::Mxfp4R8`]: super::InterleavedLayout::Mxfp4R8

use super::iq4::{get_runs, put_runs};

/// Bytes of one record (eight rows, one block column).
pub(crate) const RECORD: usize = 136;
/// Offset of the rows' exponents.
pub(crate) const E: usize = 0;
/// Offset of the runs.
pub(crate) const QS: usize = 8;

/// Writes row `r`'s (0..8) MXFP4 block (17 bytes) into its places in `record`.
pub(crate) fn put_block(r: usize, block: &[u8], record: &mut [u8]) {
    record[E + r] = block[0];
    put_runs(r, &block[1..17], QS, record);
}

/// Reads row `r`'s (0..8) MXFP4 block back out of `record`.
pub(crate) fn get_block(r: usize, record: &[u8], block: &mut [u8]) {
    block[0] = record[E + r];
    get_runs(r, record, QS, &mut block[1..17]);
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;

    use super::super::tests::quantized_rows as quantized;
    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};
    use super::*;

    #[test]
    fn places_exponents_and_runs_as_documented() {
        let (rows, k) = (16, 96);
        let plain = quantized(DType::MXFP4, rows, k);
        let layout = InterleavedLayout::Mxfp4R8;
        let mut packed = vec![0u8; layout.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len());
        interleave_rows(layout, rows, k, &plain, &mut packed).unwrap();
        // Row 11 (group 1, lane 3), block 1: record (1, 1); its bytes 8p..8p+8 in run p.
        let block = &plain[(11 * 3 + 1) * 17..(11 * 3 + 2) * 17];
        let record = &packed[(3 + 1) * RECORD..(3 + 2) * RECORD];
        assert_eq!(record[E + 3], block[0]);
        for run in 0..2 {
            let at = QS + 64 * run + 8 * 3;
            assert_eq!(&record[at..at + 8], &block[1 + 8 * run..9 + 8 * run]);
        }
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(layout, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
    }
}
