//! The Q4_0 and Q8_0 group products (records in `crate::interleaved::legacy`).
//!
//! Per block column the eight rows' integer sums are folded into one vector by a `hadd`
//! tree that leaves them in the record's scale order (rows 0, 2, 4, 6, 1, 3, 5, 7), so
//! the eight f16 scales convert in one instruction and one FMA accumulates the column.
//! Q4_0 avoids the sign trick: `Σ (q − 8)·a = Σ q·a − 8·Σ a`, with `q` the unsigned
//! nibbles (so `maddubs` and `vpdpbusd` take them as they are). Q8_0 runs the same loop
//! over its own sums ([`super::q8_0_sums`]: 32 quant bytes per row, two rows per 512-bit
//! register with AVX-512 VNNI).

use std::arch::x86_64::*;

use super::super::vectors::{load, prefetch_record, store_rows};
use super::super::{GroupProduct, IntDots};
use crate::interleaved::InterleavedLayout;
use crate::quantized::kernels::ActRow;

/// Bytes of a Q8_0 activation block.
const ACT_BYTES: usize = 34;

/// A 32-value format's group record: how its quants are loaded once and summed against
/// each activation block.
pub(in crate::quantized::x86) trait LegacyRecord {
    /// The layout.
    const LAYOUT: InterleavedLayout;
    /// The record's quants as loaded.
    type Rows<I: IntDots>: Copy;

    /// The quants of the record whose rows start at `q` (after the 16 scale bytes).
    ///
    /// # Safety
    ///
    /// The record's quant bytes are readable.
    unsafe fn rows<I: IntDots>(isa: I, q: *const u8) -> Self::Rows<I>;
    /// The eight row sums (scale order) of `rows` against the 32 activation quants at
    /// `a`, whose sum is `a_sum`.
    ///
    /// # Safety
    ///
    /// 32 readable bytes at `a`.
    unsafe fn sums<I: IntDots>(isa: I, rows: Self::Rows<I>, a: *const u8, a_sum: i32) -> __m256i;
}

/// The group product of the 32-value record `F`.
pub(in crate::quantized::x86) struct LegacyGroup<F>(F);

impl<F: LegacyRecord> GroupProduct for LegacyGroup<F> {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        let s = isa.avx2();
        let record_bytes = F::LAYOUT.record_bytes();
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group and block `b` of each activation row
            // with its scale and sum (the `GemmR8Fn` contract); the token proves AVX2,
            // FMA and F16C.
            unsafe {
                let record = w.add(b * record_bytes);
                prefetch_record(s, record, record_bytes.div_ceil(64));
                let rows = F::rows(isa, record.add(16));
                let w_scales = _mm256_cvtph_ps(_mm_loadu_si128(record as *const __m128i));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let act = acts.get_unchecked(r);
                    let sums = F::sums(
                        isa,
                        rows,
                        act.blocks.add(b * ACT_BYTES + 2),
                        *act.sums.add(b),
                    );
                    let d = _mm256_mul_ps(w_scales, _mm256_set1_ps(*act.scales.add(b)));
                    *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *acc);
                }
            }
        }
        store_rows(s, &acc, out);
    }
}

/// Q4_0 records: 16 nibble bytes per row.
pub(in crate::quantized::x86) struct Q4_0;

impl LegacyRecord for Q4_0 {
    const LAYOUT: InterleavedLayout = InterleavedLayout::Q4_0R8;
    type Rows<I: IntDots> = [__m256i; 4];

    #[inline(always)]
    unsafe fn rows<I: IntDots>(isa: I, q: *const u8) -> [__m256i; 4] {
        // SAFETY: the record's 128 quant bytes.
        unsafe { load::<4>(isa.avx2(), q) }
    }

    /// `rows[p]` holds the 16 quant bytes of row `2p` (low 128 bits) and row `2p + 1`
    /// (high); lanes come out in the order rows 0, 2, 4, 6, 1, 3, 5, 7.
    #[inline(always)]
    unsafe fn sums<I: IntDots>(isa: I, rows: [__m256i; 4], a: *const u8, a_sum: i32) -> __m256i {
        // SAFETY: 32 readable bytes at `a`; the token proves AVX2.
        unsafe {
            let low = _mm256_set1_epi8(0x0F);
            let a_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(a as *const __m128i));
            let a_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(a.add(16) as *const __m128i));
            let mut pairs = [_mm256_setzero_si256(); 4];
            for (pair, &v) in pairs.iter_mut().zip(&rows) {
                let lo = _mm256_and_si256(v, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                // Lanes 0..4: partial sums of row 2p; lanes 4..8: of row 2p + 1.
                *pair = isa.dpbusd_nibbles(lo, a_lo, hi, a_hi);
            }
            let sums = _mm256_hadd_epi32(
                _mm256_hadd_epi32(pairs[0], pairs[1]),
                _mm256_hadd_epi32(pairs[2], pairs[3]),
            );
            _mm256_sub_epi32(sums, _mm256_set1_epi32(8 * a_sum))
        }
    }
}

/// Q8_0 records: 32 signed quant bytes per row.
pub(in crate::quantized::x86) struct Q8_0;

impl LegacyRecord for Q8_0 {
    const LAYOUT: InterleavedLayout = InterleavedLayout::Q8_0R8;
    type Rows<I: IntDots> = I::Q8Rows;

    #[inline(always)]
    unsafe fn rows<I: IntDots>(isa: I, q: *const u8) -> I::Q8Rows {
        // SAFETY: the record's 256 quant bytes.
        unsafe { isa.q8_0_rows(q) }
    }

    #[inline(always)]
    unsafe fn sums<I: IntDots>(isa: I, rows: I::Q8Rows, a: *const u8, a_sum: i32) -> __m256i {
        // SAFETY: 32 readable bytes at `a`.
        unsafe { isa.q8_0_sums(rows, a, a_sum) }
    }
}
