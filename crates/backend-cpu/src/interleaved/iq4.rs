//! The records of [`InterleavedLayout::Iq4NlR8`] and [`InterleavedLayout::Iq4XsR8`] (IQ4_NL
//! and IQ4_XS rows); [`InterleavedLayout::Q4_0R8`] is IQ4_NL's record (a Q4_0 block is an
//! f16 `d` and 16 nibble bytes paired alike). A 32-value sub-block's 16 nibble bytes per
//! row are two runs of eight: run `p` (64 bytes) holds row `l`'s quant bytes `8p .. 8p + 8`
//! at `8l`. Byte `i` of a row's sub-block holds value `i` in its low nibble and value
//! `16 + i` in its high one (the formats' own pairing, kept), so in a run's 64-bit lane `l`
//! the low nibbles are values `8p .. 8p + 8` of row `l` and the high nibbles values
//! `16 + 8p ..`: against the activation's 8-byte run broadcast to every 64-bit lane, one
//! `vpdpbusd` gives each row's partial sums in its lane's two 32-bit halves (a 512-bit
//! vector holds a whole run, eight rows; a 256-bit one four). One byte shuffle through the
//! codebook turns a run's nibbles into the rows' levels, once for every activation row.
//!
//! IQ4_NL (144 bytes per record, the size of its eight blocks):
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..16 | the eight rows' `d` (f16), rows in order |
//! | 16..144 | runs `p` (0..2) of the block's quants |
//!
//! IQ4_XS (1104 bytes per record: 138 per row and super-block, 2 more than IQ4_XS's 136,
//! because the 6-bit sub-block scales are stored unpacked as signed bytes `ls − 32`):
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..16 | the eight rows' `d` (f16), rows in order |
//! | 16..80 | per sub-block `j` (0..8): the eight rows' scales `ls − 32` (i8), rows in order |
//! | 80..1104 | per sub-block `j`: its two runs (128 bytes) |
//!
//! The quant bytes are those of the format, only moved; the scales are the 6-bit values
//! IQ4_XS packs into `scales_h` and `scales_l`, so a record converts back to exactly the
//! original blocks.
//!
//! [`InterleavedLayout::Iq4NlR8`]: super::InterleavedLayout::Iq4NlR8
//! [`InterleavedLayout::Iq4XsR8`]: super::InterleavedLayout::Iq4XsR8
//! [`InterleavedLayout::Q4_0R8`]: super::InterleavedLayout::Q4_0R8

use super::ROW_GROUP;

/// Bytes of one IQ4_NL record (eight rows, one block column).
pub(crate) const NL_RECORD: usize = 144;
/// Bytes of one IQ4_XS record (eight rows, one super-block column).
pub(crate) const XS_RECORD: usize = 1104;
/// Offset of the rows' `d` values (both layouts).
pub(crate) const D: usize = 0;
/// Offset of an IQ4_NL record's runs.
pub(crate) const NL_QS: usize = 16;
/// Offset of an IQ4_XS record's sub-block scales.
pub(crate) const XS_SCALES: usize = 16;
/// Offset of an IQ4_XS record's runs.
pub(crate) const XS_QS: usize = 80;
/// Bytes of one sub-block's two runs.
pub(crate) const SUB_BLOCK_RUNS: usize = 128;
/// Sub-blocks of an IQ4_XS super-block.
const SUB_BLOCKS: usize = 8;
/// Bytes of an IQ4_XS block: `d`, `scales_h`, `scales_l[4]`, `qs[128]`.
const XS_BLOCK: usize = 136;

/// Writes row `r`'s 16 nibble bytes of one sub-block (`qs`) into its two runs at
/// `base` of `record`.
pub(super) fn put_runs(r: usize, qs: &[u8], base: usize, record: &mut [u8]) {
    for p in 0..2 {
        let at = base + 64 * p + 8 * r;
        record[at..at + 8].copy_from_slice(&qs[8 * p..8 * p + 8]);
    }
}

/// The inverse of [`put_runs`].
pub(super) fn get_runs(r: usize, record: &[u8], base: usize, qs: &mut [u8]) {
    for p in 0..2 {
        let at = base + 64 * p + 8 * r;
        qs[8 * p..8 * p + 8].copy_from_slice(&record[at..at + 8]);
    }
}

/// Writes row `r`'s (0..8) IQ4_NL block (18 bytes) into its places in `record`.
pub(crate) fn put_nl_block(r: usize, block: &[u8], record: &mut [u8]) {
    record[D + 2 * r..D + 2 * r + 2].copy_from_slice(&block[..2]);
    put_runs(r, &block[2..18], NL_QS, record);
}

/// Reads row `r`'s (0..8) IQ4_NL block back out of `record`.
pub(crate) fn get_nl_block(r: usize, record: &[u8], block: &mut [u8]) {
    block[..2].copy_from_slice(&record[D + 2 * r..D + 2 * r + 2]);
    get_runs(r, record, NL_QS, &mut block[2..18]);
}

/// Offset of row `r`'s scale of sub-block `j` in an IQ4_XS record.
const fn xs_scale_offset(r: usize, j: usize) -> usize {
    XS_SCALES + ROW_GROUP * j + r
}

/// Writes row `r`'s (0..8) IQ4_XS block (136 bytes) into its places in `record`.
pub(crate) fn put_xs_block(r: usize, block: &[u8], record: &mut [u8]) {
    record[D + 2 * r..D + 2 * r + 2].copy_from_slice(&block[..2]);
    let high = u16::from_le_bytes([block[2], block[3]]);
    for j in 0..SUB_BLOCKS {
        let low = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0F;
        let ls = low | ((((high >> (2 * j)) & 3) as u8) << 4);
        record[xs_scale_offset(r, j)] = (ls as i8 - 32) as u8;
        let qs = &block[8 + 16 * j..8 + 16 * j + 16];
        put_runs(r, qs, XS_QS + SUB_BLOCK_RUNS * j, record);
    }
}

/// Reads row `r`'s (0..8) IQ4_XS block back out of `record`.
pub(crate) fn get_xs_block(r: usize, record: &[u8], block: &mut [u8]) {
    block[..2].copy_from_slice(&record[D + 2 * r..D + 2 * r + 2]);
    let mut high = 0u16;
    let mut low = [0u8; 4];
    for j in 0..SUB_BLOCKS {
        let ls = (record[xs_scale_offset(r, j)] as i8 as i16 + 32) as u16;
        high |= (ls >> 4 & 3) << (2 * j);
        low[j / 2] |= ((ls & 0x0F) as u8) << (4 * (j % 2));
        let base = XS_QS + SUB_BLOCK_RUNS * j;
        get_runs(r, record, base, &mut block[8 + 16 * j..8 + 16 * j + 16]);
    }
    block[2..4].copy_from_slice(&high.to_le_bytes());
    block[4..8].copy_from_slice(&low);
    debug_assert_eq!(block.len(), XS_BLOCK);
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;

    use super::super::tests::quantized_rows as quantized;
    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};
    use super::*;

    #[test]
    fn iq4_nl_places_runs_as_documented() {
        let (rows, k) = (16, 96);
        let plain = quantized(DType::IQ4NL, rows, k);
        let mut packed = vec![0u8; InterleavedLayout::Iq4NlR8.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len());
        interleave_rows(InterleavedLayout::Iq4NlR8, rows, k, &plain, &mut packed).unwrap();
        // Row 9 (group 1, lane 1), block 2: record (1, 2); its bytes 8p..8p+8 in run p.
        let block = &plain[(9 * 3 + 2) * 18..(9 * 3 + 3) * 18];
        let record = &packed[(3 + 2) * NL_RECORD..(3 + 3) * NL_RECORD];
        assert_eq!(&record[2..4], &block[..2]);
        for run in 0..2 {
            let at = NL_QS + 64 * run + 8;
            assert_eq!(&record[at..at + 8], &block[2 + 8 * run..10 + 8 * run]);
        }
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(InterleavedLayout::Iq4NlR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
    }

    #[test]
    fn iq4_xs_unpacks_the_scales_and_round_trips() {
        let (rows, k) = (16, 512);
        let plain = quantized(DType::IQ4XS, rows, k);
        let mut packed = vec![0u8; InterleavedLayout::Iq4XsR8.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len() / XS_BLOCK * 138);
        interleave_rows(InterleavedLayout::Iq4XsR8, rows, k, &plain, &mut packed).unwrap();
        // Row 10 (group 1, lane 2), super-block 1: record (1, 1).
        let block = &plain[(10 * 2 + 1) * XS_BLOCK..(10 * 2 + 2) * XS_BLOCK];
        let record = &packed[3 * XS_RECORD..4 * XS_RECORD];
        assert_eq!(&record[4..6], &block[..2]);
        let mut distinct = std::collections::BTreeSet::new();
        for j in 0..SUB_BLOCKS {
            // The scale as IQ4_XS's reference unpacks it.
            let high = u16::from_le_bytes([block[2], block[3]]) as i32;
            let low = block[4 + j / 2] as i32 >> (4 * (j % 2)) & 0x0F;
            let ls = (low | (high >> (2 * j) & 3) << 4) - 32;
            assert_eq!(
                record[xs_scale_offset(2, j)] as i8 as i32,
                ls,
                "sub-block {j}"
            );
            distinct.insert(ls);
            // Run 1 of sub-block j, lane 2: the sub-block's bytes 8..16.
            let at = XS_QS + SUB_BLOCK_RUNS * j + 64 + 16;
            assert_eq!(&record[at..at + 8], &block[8 + 16 * j + 8..8 + 16 * j + 16]);
        }
        assert!(distinct.len() > 1, "the test values give one scale only");
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(InterleavedLayout::Iq4XsR8, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
    }
}
