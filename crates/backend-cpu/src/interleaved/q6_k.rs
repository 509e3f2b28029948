//! The record of [`InterleavedLayout::Q6KR8`] (Q6_K rows): for each group of eight rows and
//! each super-block column, one record of 1680 bytes (8 × 210, Q6_K's own size: the
//! bytes are only moved). As in [`super::q4_k`], 32-bit lane `l` of a kernel's
//! vectors belongs to row `l`:
//!
//! | bytes | contents |
//! | --- | --- |
//! | 0..16 | the eight rows' `d` (f16), rows in order |
//! | 16..144 | per 16-value sub-block `s` (0..16): 8 bytes, the eight rows' i8 scales |
//! | 144..1680 | per half `n` (0..2) and step `t` (0..8): 96 bytes, three runs of 32 (below) |
//!
//! Step `t` of half `n` covers, for each row, the four value positions `l = 4t..4t + 4`
//! of that half and their companions `l + 32`, `l + 64`, `l + 96` (Q6_K's own grouping:
//! one low-bits byte holds values `l` and `l + 64`, one high-bits byte holds the top two
//! bits of all four):
//!
//! - `+0`: row `r`'s `ql[64n + 4t ..][..4]` at `4r` (low nibbles: values `l`, high
//!   nibbles: values `l + 64`);
//! - `+32`: row `r`'s `ql[64n + 32 + 4t ..][..4]` (values `l + 32` and `l + 96`);
//! - `+64`: row `r`'s `qh[32n + 4t ..][..4]` (bit pairs 0, 2, 4, 6: values `l`,
//!   `l + 32`, `l + 64`, `l + 96`).
//!
//! So one step yields four vectors of four 6-bit values per row, each against a 4-byte
//! activation run broadcast to every lane, and every run of four steps (`t = 4h..4h +
//! 4`) completes four 16-value sub-blocks (`8n + h + 2i`, `i` = 0..4) for all eight rows:
//! no shuffles and no horizontal sums, and the steps are read in address order.
//!
//! [`InterleavedLayout::Q6KR8`]: super::InterleavedLayout::Q6KR8

/// Bytes of one record (eight rows, one super-block column).
pub(crate) const RECORD: usize = 1680;
/// Offset of the `d` values.
pub(crate) const D: usize = 0;
/// Offset of the per-sub-block scales.
pub(crate) const SCALES: usize = 16;
/// Offset of the quant steps.
pub(crate) const QS: usize = 144;

/// Offsets inside a Q6_K block (210 bytes): low bits, high bits, scales, `d`.
const QL: usize = 0;
const QH: usize = 128;
const SC: usize = 192;
const DD: usize = 208;

/// Offset of step `t` (0..8) of half `n` (0..2): its low-bits runs at `+0` and `+32`,
/// its high-bits run at `+64`.
pub(crate) const fn step_offset(n: usize, t: usize) -> usize {
    QS + (8 * n + t) * 96
}

/// Calls `f(record offset, block offset)` for each 4-byte quant run of row `r` (plain
/// loops: an iterator chain here did not inline and showed up in the profile of Q4_K_M
/// prefill, which gathers Q6_K blocks back for its dequantizing GEMM).
#[inline]
fn for_each_quant_run(r: usize, mut f: impl FnMut(usize, usize)) {
    for n in 0..2 {
        for t in 0..8 {
            let at = step_offset(n, t) + 4 * r;
            f(at, QL + 64 * n + 4 * t);
            f(at + 32, QL + 64 * n + 32 + 4 * t);
            f(at + 64, QH + 32 * n + 4 * t);
        }
    }
}

/// Writes row `r`'s (0..8) Q6_K block (210 bytes) into its places in `record`.
pub(crate) fn put_block(r: usize, block: &[u8], record: &mut [u8]) {
    record[D + 2 * r..D + 2 * r + 2].copy_from_slice(&block[DD..DD + 2]);
    for s in 0..16 {
        record[SCALES + 8 * s + r] = block[SC + s];
    }
    for_each_quant_run(r, |at, from| {
        record[at..at + 4].copy_from_slice(&block[from..from + 4]);
    });
}

/// Reads row `r`'s (0..8) Q6_K block (210 bytes) back out of `record`.
pub(crate) fn get_block(r: usize, record: &[u8], block: &mut [u8]) {
    block[DD..DD + 2].copy_from_slice(&record[D + 2 * r..D + 2 * r + 2]);
    for s in 0..16 {
        block[SC + s] = record[SCALES + 8 * s + r];
    }
    for_each_quant_run(r, |at, to| {
        block[to..to + 4].copy_from_slice(&record[at..at + 4]);
    });
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;
    use tempra_tensor::quant::quantize_row;

    use super::super::{InterleavedLayout, deinterleave_rows, interleave_rows};

    #[test]
    fn q6_k_round_trips_with_lane_per_row_steps() {
        use super::{D, RECORD, SCALES, step_offset};
        let (rows, k) = (16, 512);
        let vals: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3 + (i / 97 % 5) as f32)
            .collect();
        let mut plain = vec![0u8; DType::Q6K.bytes_for(rows * k).unwrap()];
        quantize_row(DType::Q6K, &vals, &mut plain).unwrap();
        let mut packed = vec![0u8; InterleavedLayout::Q6KR8.bytes_for(rows, k).unwrap()];
        assert_eq!(packed.len(), plain.len());
        interleave_rows(InterleavedLayout::Q6KR8, rows, k, &plain, &mut packed).unwrap();
        assert_ne!(packed, plain);
        let mut back = vec![0u8; plain.len()];
        deinterleave_rows(InterleavedLayout::Q6KR8, rows, k, &packed, &mut back).unwrap();
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
}
