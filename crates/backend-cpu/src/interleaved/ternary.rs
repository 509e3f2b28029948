//! The record of [`InterleavedLayout::Tq1_0R8`] and [`InterleavedLayout::Tq2_0R8`] (TQ1_0
//! and TQ2_0 rows): both hold each row's values as TQ2_0's 2-bit codes `t + 1`, so a
//! TQ1_0 weight is unpacked from its five base-3 digits per byte once, at load, and its
//! products cost what TQ2_0's do (its record is 528 bytes for the 432 of eight TQ1_0
//! blocks). 32-bit lane `l` of a kernel's vectors belongs to row `l` throughout:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..16 | the eight rows' `d` (f16), rows in order |
//! | 16..528 | steps `s` (0..16), 32 bytes each: row `l`'s code bytes `4s .. 4s + 4` (TQ2_0's `qs`) at `4l` |
//!
//! Bits `2n .. 2n + 2` of code byte `4s + i` hold value `128h + 32n + 4k + i`, where
//! `h = s / 8` and `k = s % 8` (TQ2_0's own pairing, kept), so one step's four bit pairs
//! meet four 4-byte runs of the activation, each broadcast to every lane.
//!
//! A TQ2_0 record holds the format's bytes, only moved. A TQ1_0 record converts back to
//! the blocks ggml's quantizer packs for the same codes and scale: the original's bytes
//! whenever it was written so (a byte that another packer chose among those decoding to
//! the same digits comes back as the canonical one), and always the same values.
//!
//! [`InterleavedLayout::Tq1_0R8`]: super::InterleavedLayout::Tq1_0R8
//! [`InterleavedLayout::Tq2_0R8`]: super::InterleavedLayout::Tq2_0R8

use tempra_tensor::quant::{BlockTQ1_0, BlockTQ2_0};

/// Bytes of one record (eight rows, one super-block column).
pub(crate) const RECORD: usize = 528;
/// Offset of the rows' `d` values.
pub(crate) const D: usize = 0;
/// Offset of the steps.
pub(crate) const QS: usize = 16;
/// Steps per record.
pub(crate) const STEPS: usize = 16;
/// Bytes of a TQ2_0 block's codes.
const CODE_BYTES: usize = 64;

/// Writes row `r`'s (0..8) TQ2_0 block (66 bytes: `qs[64]`, `d`) into its places in
/// `record`.
pub(crate) fn put_tq2_block(r: usize, block: &[u8], record: &mut [u8]) {
    record[D + 2 * r..D + 2 * r + 2].copy_from_slice(&block[CODE_BYTES..CODE_BYTES + 2]);
    for s in 0..STEPS {
        let at = QS + 32 * s + 4 * r;
        record[at..at + 4].copy_from_slice(&block[4 * s..4 * s + 4]);
    }
}

/// Reads row `r`'s (0..8) TQ2_0 block back out of `record`.
pub(crate) fn get_tq2_block(r: usize, record: &[u8], block: &mut [u8]) {
    block[CODE_BYTES..CODE_BYTES + 2].copy_from_slice(&record[D + 2 * r..D + 2 * r + 2]);
    for s in 0..STEPS {
        let at = QS + 32 * s + 4 * r;
        block[4 * s..4 * s + 4].copy_from_slice(&record[at..at + 4]);
    }
}

/// Writes row `r`'s (0..8) TQ1_0 block (54 bytes) into its places in `record`, as the
/// TQ2_0 block of the same codes and scale.
pub(crate) fn put_tq1_block(r: usize, block: &[u8], record: &mut [u8]) {
    let tq1: BlockTQ1_0 = bytemuck::pod_read_unaligned(block);
    let tq2 = BlockTQ2_0::from_codes(&tq1.codes(), tq1.d);
    put_tq2_block(r, bytemuck::bytes_of(&tq2), record);
}

/// Reads row `r`'s (0..8) TQ1_0 block back out of `record` (packed as ggml packs it).
pub(crate) fn get_tq1_block(r: usize, record: &[u8], block: &mut [u8]) {
    let mut tq2 = [0u8; size_of::<BlockTQ2_0>()];
    get_tq2_block(r, record, &mut tq2);
    let tq2: BlockTQ2_0 = bytemuck::pod_read_unaligned(&tq2);
    let tq1 = BlockTQ1_0::from_codes(&tq2.codes(), tq2.d);
    block.copy_from_slice(bytemuck::bytes_of(&tq1));
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;
    use tempra_tensor::quant::{dequantize_row, quantize_row};

    use super::super::tests::quantized_rows as quantized;
    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};
    use super::*;

    #[test]
    fn tq2_0_places_steps_as_documented() {
        let (rows, k) = (16, 512);
        let plain = quantized(DType::TQ2_0, rows, k);
        let layout = InterleavedLayout::Tq2_0R8;
        let mut packed = vec![0u8; layout.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len());
        interleave_rows(layout, rows, k, &plain, &mut packed).unwrap();
        // Row 11 (group 1, lane 3), block 1: record (1, 1); its code bytes 4s.. in step s.
        let block = &plain[(11 * 2 + 1) * 66..(11 * 2 + 2) * 66];
        let record = &packed[3 * RECORD..4 * RECORD];
        assert_eq!(&record[6..8], &block[64..66]);
        for s in 0..STEPS {
            let at = QS + 32 * s + 12;
            assert_eq!(&record[at..at + 4], &block[4 * s..4 * s + 4], "step {s}");
        }
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(layout, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
    }

    #[test]
    fn tq1_0_becomes_tq2_0_codes_and_comes_back() {
        let (rows, k) = (8, 768);
        // Values of both signs, so every digit occurs.
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.4)
            .collect();
        let mut plain = vec![0u8; DType::TQ1_0.bytes_for(rows * k).unwrap()];
        quantize_row(DType::TQ1_0, &vals, &mut plain).unwrap();
        let layout = InterleavedLayout::Tq1_0R8;
        let mut packed = vec![0u8; layout.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len() / 54 * 66);
        interleave_rows(layout, rows, k, &plain, &mut packed).unwrap();
        // Each record is the TQ2_0 record of the same values.
        let mut as_tq2 = vec![0u8; plain.len() / 54 * 66];
        deinterleave_rows(InterleavedLayout::Tq2_0R8, rows, k, &packed, &mut as_tq2).unwrap();
        let (mut want, mut got) = (vec![0f32; rows * k], vec![0f32; rows * k]);
        dequantize_row(DType::TQ1_0, &plain, &mut want).unwrap();
        dequantize_row(DType::TQ2_0, &as_tq2, &mut got).unwrap();
        assert_eq!(got, want);
        assert!(want.iter().any(|&v| v > 0.0) && want.iter().any(|&v| v < 0.0));
        // The quantizer's bytes come back exactly.
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(layout, rows, k, &packed, &mut back).unwrap();
        assert_eq!(back, plain);
    }
}
