//! Row-major dot products of the 32-value formats: Q4_0, Q5_0, Q8_0 against Q8_0
//! activations and Q4_1, Q5_1 against Q8_1.
//!
//! Block layouts (bytes): Q4_0 `d:f16 qs[16]` (18), Q4_1 `d m qs[16]` (20), Q5_0
//! `d qh[4] qs[16]` (22), Q5_1 `d m qh[4] qs[16]` (24), Q8_0 `d qs[32]` (34), Q8_1
//! `d s qs[32]` (36).
//!
//! Each format unpacks its block to 32 bytes ([`LegacyFormat::levels`]); the integer sum
//! of a block is [`IntDots::dpbusd`] (`maddubs` + `madd` on AVX2, one `vpdpbusd` with
//! VNNI), scaled by one f32 FMA per block. Blocks alternate between two accumulator
//! sets (a single chain would wait out the FMA latency on every block), at every row
//! count, so a row's sum is the same bits alone (decode) as in a tile of four (prefill).

use std::arch::x86_64::*;

use super::super::vectors::{bits32, fp16, fp16_product, hsum, nibbles32, prefetch_row, rows};
use super::super::{IntDots, RowDot};
use crate::x86::Avx2;

/// How far ahead of the current block the weight row is prefetched (one hint per block).
const PREFETCH_BYTES: usize = 4096;

/// A 32-value format: its block size and how a block unpacks to 32 bytes.
pub(in crate::quantized::x86) trait LegacyFormat {
    /// Bytes of a weight block.
    const BLOCK_BYTES: usize;
    /// Whether the format has a min (Q4_1, Q5_1: unsigned levels against Q8_1 blocks,
    /// the min summed apart in f32); the others have signed levels against Q8_0.
    const HAS_MIN: bool;

    /// The block's 32 levels: signed (−127..=127) without a min, unsigned with one.
    ///
    /// # Safety
    ///
    /// A readable weight block at `wp`.
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i;

    /// The block's scale times the activation block's at `ap` (`d_w · d_a`): two f16s,
    /// the weight's at `wp`, unless the format says otherwise (MXFP4's E8M0 exponent).
    ///
    /// # Safety
    ///
    /// A readable weight block at `wp` and activation block at `ap`.
    #[inline(always)]
    unsafe fn scale_product(s: Avx2, wp: *const u8, ap: *const u8) -> f32 {
        // SAFETY: each block starts with its f16 scale (the caller's contract).
        unsafe { fp16_product(s, wp, ap) }
    }
}

/// The row-major dot product of the 32-value format `F`.
pub(in crate::quantized::x86) struct Legacy<F>(F);

impl<F: LegacyFormat> RowDot for Legacy<F> {
    #[inline(always)]
    unsafe fn dot<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    ) {
        let s = isa.avx2();
        // SAFETY: the caller guarantees `R` activation rows.
        let mut a: [*const u8; R] = unsafe { rows::<R>(acts) };
        // SAFETY: the token proves AVX.
        let mut pair = [[unsafe { _mm256_setzero_ps() }; R]; 2];
        let mut mins = [0f32; R];
        let mut blk = 0;
        // Pairs of blocks feed the two sets; a last odd block the first.
        while blk + 1 < nb {
            // SAFETY: blocks `blk` and `blk + 1 < nb` of the weight and activation rows.
            unsafe {
                one_block::<I, F, R>(isa, w, blk, &mut a, &mut pair[0], &mut mins);
                one_block::<I, F, R>(isa, w, blk + 1, &mut a, &mut pair[1], &mut mins);
            }
            blk += 2;
        }
        if blk < nb {
            // SAFETY: block `blk < nb` of the weight and activation rows.
            unsafe { one_block::<I, F, R>(isa, w, blk, &mut a, &mut pair[0], &mut mins) };
        }
        for r in 0..R {
            // SAFETY: the token proves AVX.
            let sum = hsum(s, unsafe { _mm256_add_ps(pair[0][r], pair[1][r]) });
            out[r] = if F::HAS_MIN { sum + mins[r] } else { sum };
        }
    }
}

/// Block `blk` of the weight row at `w` against the activation blocks at `a` (which then
/// step to the next block), added into `acc` and `mins`.
///
/// # Safety
///
/// Block `blk` of the weight row and a readable activation block at each `a[r]`.
#[inline(always)]
unsafe fn one_block<I: IntDots, F: LegacyFormat, const R: usize>(
    isa: I,
    w: *const u8,
    blk: usize,
    a: &mut [*const u8; R],
    acc: &mut [__m256; R],
    mins: &mut [f32; R],
) {
    // SAFETY: block `blk` of the weight row (the caller's contract).
    let wp = unsafe { w.add(blk * F::BLOCK_BYTES) };
    let s = isa.avx2();
    prefetch_row(s, wp, PREFETCH_BYTES, 1);
    // SAFETY: the weight block at `wp` and an activation block at each `a[r]` (Q8_1
    // for a format with a min, else Q8_0).
    unsafe {
        let qx = F::levels(s, wp);
        if F::HAS_MIN {
            unsigned_step(isa, qx, wp, a, acc, mins);
        } else {
            signed_step::<I, F, R>(isa, qx, wp, a, acc);
        }
    }
    let act_bytes = if F::HAS_MIN { 36 } else { 34 };
    for p in a.iter_mut() {
        // SAFETY: stays within (or one past) each activation row of `nb` blocks.
        *p = unsafe { p.add(act_bytes) };
    }
}

/// Signed weights `qx` (−127..=127, scaled by `F::scale_product`) against Q8_0
/// activation rows: the step Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 share.
///
/// # Safety
///
/// The f16 scale at `wp`; each `a[r]` points to a readable Q8_0 block.
#[inline(always)]
unsafe fn signed_step<I: IntDots, F: LegacyFormat, const R: usize>(
    isa: I,
    qx: __m256i,
    wp: *const u8,
    a: &[*const u8; R],
    acc: &mut [__m256; R],
) {
    let s = isa.avx2();
    // SAFETY: the token proves AVX2.
    let ax = unsafe { _mm256_sign_epi8(qx, qx) };
    for r in 0..R {
        // SAFETY: a readable 34-byte Q8_0 block at `a[r]`, the weight scale at `wp`;
        // the token proves AVX2 and FMA.
        unsafe {
            let d = F::scale_product(s, wp, a[r]);
            let qy = _mm256_loadu_si256(a[r].add(2) as *const __m256i);
            let zero = _mm256_setzero_si256();
            let p = _mm256_cvtepi32_ps(isa.dpbusd(zero, ax, _mm256_sign_epi8(qy, qx)));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), p, acc[r]);
        }
    }
}

/// Unsigned weights `qx` (scale the f16 at `wp`) with a min `m` against Q8_1 activation
/// rows: the step Q4_1 and Q5_1 share.
///
/// # Safety
///
/// The f16 scale at `wp`; each `a[r]` points to a readable Q8_1 block.
#[inline(always)]
unsafe fn unsigned_step<I: IntDots, const R: usize>(
    isa: I,
    qx: __m256i,
    wp: *const u8,
    a: &[*const u8; R],
    acc: &mut [__m256; R],
    mins: &mut [f32; R],
) {
    let s = isa.avx2();
    // SAFETY: the min's f16 follows the scale at `wp`.
    let m = unsafe { fp16(s, wp.add(2)) };
    for r in 0..R {
        // SAFETY: a readable 36-byte Q8_1 block at `a[r]`, the weight scale at `wp`; the
        // token proves AVX2 and FMA.
        let sa = unsafe {
            let d = fp16_product(s, wp, a[r]);
            let qy = _mm256_loadu_si256(a[r].add(4) as *const __m256i);
            let sums = _mm256_cvtepi32_ps(isa.dpbusd(_mm256_setzero_si256(), qx, qy));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), sums, acc[r]);
            fp16(s, a[r].add(2))
        };
        mins[r] += m * sa;
    }
}

/// Q4_0: 32 nibbles minus 8.
pub(in crate::quantized::x86) struct Q4_0;

impl LegacyFormat for Q4_0 {
    const BLOCK_BYTES: usize = 18;
    const HAS_MIN: bool = false;

    #[inline(always)]
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: an 18-byte block at `wp`; the token proves AVX2.
        unsafe { _mm256_sub_epi8(nibbles32(s, wp.add(2)), _mm256_set1_epi8(8)) }
    }
}

/// Q5_0: 32 nibbles with a fifth bit, minus 16.
pub(in crate::quantized::x86) struct Q5_0;

impl LegacyFormat for Q5_0 {
    const BLOCK_BYTES: usize = 22;
    const HAS_MIN: bool = false;

    #[inline(always)]
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: a 22-byte block at `wp`; the token proves AVX2.
        unsafe {
            // level = nibble | (bit << 4) − 16: OR 0xF0 (−16 as i8) where the bit is clear.
            let hi = _mm256_andnot_si256(bits32(s, wp.add(2)), _mm256_set1_epi8(0xF0u8 as i8));
            _mm256_or_si256(nibbles32(s, wp.add(6)), hi)
        }
    }
}

/// Q8_0: 32 signed bytes.
pub(in crate::quantized::x86) struct Q8_0;

impl LegacyFormat for Q8_0 {
    const BLOCK_BYTES: usize = 34;
    const HAS_MIN: bool = false;

    #[inline(always)]
    unsafe fn levels(_: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: a 34-byte block at `wp`; the token proves AVX.
        unsafe { _mm256_loadu_si256(wp.add(2) as *const __m256i) }
    }
}

/// Q4_1: 32 nibbles, a scale and a min.
pub(in crate::quantized::x86) struct Q4_1;

impl LegacyFormat for Q4_1 {
    const BLOCK_BYTES: usize = 20;
    const HAS_MIN: bool = true;

    #[inline(always)]
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: a 20-byte block at `wp`.
        unsafe { nibbles32(s, wp.add(4)) }
    }
}

/// Q5_1: 32 nibbles with a fifth bit, a scale and a min.
pub(in crate::quantized::x86) struct Q5_1;

impl LegacyFormat for Q5_1 {
    const BLOCK_BYTES: usize = 24;
    const HAS_MIN: bool = true;

    #[inline(always)]
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: a 24-byte block at `wp`; the token proves AVX2.
        unsafe {
            let hi = _mm256_and_si256(bits32(s, wp.add(4)), _mm256_set1_epi8(0x10));
            _mm256_or_si256(nibbles32(s, wp.add(8)), hi)
        }
    }
}
