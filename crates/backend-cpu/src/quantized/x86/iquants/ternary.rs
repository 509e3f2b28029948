//! TQ1_0 and TQ2_0 against Q8_K: the ternary digits `t + 1` (0, 1, 2; TQ2_0's unused
//! code 3 reads as 3, the reference's `t = 2`) multiply the activations unsigned, and the
//! block's `Σ q` (from Q8_K's sums of 16) is subtracted once: `Σ (t + 1) · q − Σ q`.

use std::arch::x86_64::*;

use super::super::row_major::k_quants::add_scaled;
use super::super::vectors::fp16;
use super::super::{Q8K_BSUMS, Q8K_QS};
use super::{BlockKernel, IntDots};
use crate::x86::Avx2;

/// `acc[r] += (d_w · d_a) · (sumi[r] − Σ q)` for each row's Q8_K block at `a[r]`.
///
/// # Safety
///
/// Each `a[r]` points to a readable Q8_K block; the caller is compiled for `isa`'s
/// features.
#[inline(always)]
unsafe fn finish<I: IntDots, const R: usize>(
    isa: I,
    d: f32,
    mut sumi: [__m256i; R],
    a: &[*const u8; R],
    acc: &mut [__m256; R],
) {
    for (r, sum) in sumi.iter_mut().enumerate() {
        // SAFETY: the block's 16 sums at `Q8K_BSUMS` (the caller's contract); the token
        // proves AVX2.
        unsafe {
            let bsums = _mm256_loadu_si256(a[r].add(Q8K_BSUMS) as *const __m256i);
            let total = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));
            *sum = _mm256_sub_epi32(*sum, total);
        }
    }
    // SAFETY: the caller's contract.
    unsafe { add_scaled(isa, acc, d, a, &sumi) };
}

/// `sumi[r] += Σ u · q` over the 32 activations at offset `at` of each row's Q8_K block.
///
/// # Safety
///
/// Each `a[r]` points to a readable Q8_K block, `at + 32 <= 256`; AVX2 present.
#[inline(always)]
unsafe fn accumulate<I: IntDots, const R: usize>(
    isa: I,
    u: __m256i,
    at: usize,
    a: &[*const u8; R],
    sumi: &mut [__m256i; R],
) {
    for r in 0..R {
        // SAFETY: 32 activation quants inside the block (the caller's contract).
        let y = unsafe { _mm256_loadu_si256(a[r].add(Q8K_QS + at) as *const __m256i) };
        sumi[r] = isa.dpbusd(sumi[r], u, y);
    }
}

/// TQ2_0 (66 bytes: 64 bytes of 2-bit codes, `d`).
pub(in crate::quantized::x86) struct Tq2_0;

impl BlockKernel for Tq2_0 {
    const BLOCK_BYTES: usize = 66;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
    ) {
        // SAFETY: the token proves AVX2, FMA and F16C; a 66-byte block at `wp` and a Q8_K
        // block at each `a[r]` (the caller's contract).
        unsafe {
            let m3 = _mm256_set1_epi8(3);
            let mut sumi = [_mm256_setzero_si256(); R];
            for half in 0..2 {
                let v = _mm256_loadu_si256(wp.add(32 * half) as *const __m256i);
                let codes = [
                    _mm256_and_si256(v, m3),
                    _mm256_and_si256(_mm256_srli_epi16(v, 2), m3),
                    _mm256_and_si256(_mm256_srli_epi16(v, 4), m3),
                    _mm256_and_si256(_mm256_srli_epi16(v, 6), m3),
                ];
                for (n, &u) in codes.iter().enumerate() {
                    accumulate(isa, u, 128 * half + 32 * n, a, &mut sumi);
                }
            }
            finish(isa, fp16(isa.avx2(), wp.add(64)), sumi, a, acc);
        }
    }
}

/// `3q mod 256` per byte.
#[inline(always)]
fn times3(_: Avx2, q: __m256i) -> __m256i {
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_add_epi8(q, _mm256_add_epi8(q, q)) }
}

/// The leading base-3 digit of each byte: `(3q) >> 8` (0, 1 or 2).
#[inline(always)]
fn digit(_: Avx2, q: __m256i) -> __m256i {
    // SAFETY: the token proves AVX2.
    unsafe {
        let three = _mm256_set1_epi16(3);
        // Low bytes moved up and high bytes masked: `mulhi` by 3 leaves (3q) >> 8 of each
        // in the low byte of its 16-bit lane.
        let low = _mm256_mulhi_epu16(_mm256_slli_epi16(q, 8), three);
        let high = _mm256_mulhi_epu16(_mm256_and_si256(q, _mm256_set1_epi16(-256)), three);
        _mm256_or_si256(low, _mm256_slli_epi16(high, 8))
    }
}

/// TQ1_0 (54 bytes: 48 bytes of five digits, 4 bytes of four digits, `d`). Digit `n` of
/// a byte is the leading digit of `byte · 3^n mod 256`.
pub(in crate::quantized::x86) struct Tq1_0;

impl BlockKernel for Tq1_0 {
    const BLOCK_BYTES: usize = 54;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
    ) {
        // SAFETY: the token proves AVX2, FMA and F16C; a 54-byte block at `wp` and a Q8_K
        // block at each `a[r]` (the caller's contract).
        unsafe {
            let mut sumi = [_mm256_setzero_si256(); R];
            // Bytes 0..32: digit n of byte m is value 32n + m.
            let mut q = _mm256_loadu_si256(wp as *const __m256i);
            for n in 0..5 {
                accumulate(isa, digit(isa.avx2(), q), 32 * n, a, &mut sumi);
                q = times3(isa.avx2(), q);
            }
            // Bytes 32..48: digit n of byte m is value 160 + 16n + m; digits n and n + 1
            // side by side make 32 values.
            let mid = _mm_loadu_si128(wp.add(32) as *const __m128i);
            let mid3 = _mm_add_epi8(mid, _mm_add_epi8(mid, mid));
            let mut pair = _mm256_set_m128i(mid3, mid);
            for k in 0..2 {
                accumulate(isa, digit(isa.avx2(), pair), 160 + 32 * k, a, &mut sumi);
                pair = times3(isa.avx2(), times3(isa.avx2(), pair));
            }
            // Digit 4 of bytes 32..48 (values 224..240), then the four bytes at 48 whose
            // digit n of byte j is value 240 + 4n + j.
            let qh = _mm_set1_epi32(std::ptr::read_unaligned(wp.add(48) as *const i32));
            let qh3 = _mm_add_epi8(qh, _mm_add_epi8(qh, qh));
            let qh9 = _mm_add_epi8(qh3, _mm_add_epi8(qh3, qh3));
            let qh27 = _mm_add_epi8(qh9, _mm_add_epi8(qh9, qh9));
            let qh = _mm_blend_epi32::<0b1000>(
                _mm_blend_epi32::<0b0100>(_mm_blend_epi32::<0b0010>(qh, qh3), qh9),
                qh27,
            );
            let last = _mm256_set_m128i(qh, _mm256_castsi256_si128(pair));
            accumulate(isa, digit(isa.avx2(), last), 224, a, &mut sumi);
            finish(isa, fp16(isa.avx2(), wp.add(52)), sumi, a, acc);
        }
    }
}
