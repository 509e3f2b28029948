//! The integer steps of the Q4_KR8 and Q5_KR8 products (`interleaved`'s `k_r8_kernel!`):
//! each 32-bit lane belongs to one of the group's eight rows. A step's levels come from
//! `levels_q4_k` (the nibbles) or `levels_q5_k` (the nibbles and the fifth bits). Two
//! arithmetics:
//!
//! - AVX2: a step's `maddubs` (u8 × i8 pairs → i16) is added in 16 bits (a 32-value
//!   sub-block reaches at most 8 · 2 · 15 · 128 = 30720), and one `madd` per sub-block
//!   with the rows' scales, each byte doubled to fill a lane's two 16-bit halves,
//!   widens to i32.
//! - VNNI: a step's `vpdpbusd` adds four products straight into the i32 lane, and the
//!   sub-block ends with one `vpmulld` by the rows' scales widened to 32 bits (the step
//!   is `vnni::dpbusd_avx` / `dpbusd_avx512`): two
//!   fewer instructions per step (no `maddubs` + add pair), one more per sub-block.
//!
//! Q5_K levels reach 31, so its AVX2 sub-block sums stay in two 16-bit partials of four
//! steps (8 · 2 · 31 · 128 would overflow), each scaled on its own (`join_madd_apart`).

use std::arch::x86_64::*;

/// `acc + maddubs(q, a)` in 16-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn step_maddubs(acc: __m256i, q: __m256i, a: __m256i) -> __m256i {
    _mm256_add_epi16(acc, _mm256_maddubs_epi16(q, a))
}

/// A chunk's scale bytes (eight rows of sub-block `2j`, then of `2j + 1`) as 16-bit
/// pairs `(s, s)` per lane, for [`finish_madd`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scales_paired(sc: __m128i) -> (__m256i, __m256i) {
    (
        _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc)),
        _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sc, sc)),
    )
}

/// A chunk's scale bytes as one i32 per lane, for [`finish_mullo`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scales_wide(sc: __m128i) -> (__m256i, __m256i) {
    (
        _mm256_cvtepu8_epi32(sc),
        _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(sc)),
    )
}

/// The two sub-blocks' 16-bit sums times their scales, in i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn finish_madd(lo: __m256i, sc_lo: __m256i, hi: __m256i, sc_hi: __m256i) -> __m256i {
    _mm256_add_epi32(_mm256_madd_epi16(lo, sc_lo), _mm256_madd_epi16(hi, sc_hi))
}

/// [`finish_madd`] of the two sub-blocks' partial 16-bit sums, joined in 16 bits first
/// (Q4_K: eight steps of levels below 16 fit).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn join_madd(
    lo: [__m256i; 2],
    sc_lo: __m256i,
    hi: [__m256i; 2],
    sc_hi: __m256i,
) -> __m256i {
    finish_madd(
        _mm256_add_epi16(lo[0], lo[1]),
        sc_lo,
        _mm256_add_epi16(hi[0], hi[1]),
        sc_hi,
    )
}

/// [`finish_madd`] of each partial apart, joined in 32 bits (Q5_K: four steps of
/// levels up to 31 fit 16 bits, eight do not).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn join_madd_apart(
    lo: [__m256i; 2],
    sc_lo: __m256i,
    hi: [__m256i; 2],
    sc_hi: __m256i,
) -> __m256i {
    _mm256_add_epi32(
        finish_madd(lo[0], sc_lo, hi[0], sc_hi),
        finish_madd(lo[1], sc_lo, hi[1], sc_hi),
    )
}

/// The two sub-blocks' 32-bit sums (each two partials) times their scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn join_mullo(
    lo: [__m256i; 2],
    sc_lo: __m256i,
    hi: [__m256i; 2],
    sc_hi: __m256i,
) -> __m256i {
    _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_add_epi32(lo[0], lo[1]), sc_lo),
        _mm256_mullo_epi32(_mm256_add_epi32(hi[0], hi[1]), sc_hi),
    )
}

/// Step `k` of chunk `j` of a Q4_KR8 record: the low nibbles (sub-block `2j`) and the
/// high nibbles (`2j + 1`) of its 32 quant bytes.
///
/// # Safety
///
/// `record` is a readable Q4_KR8 record; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn levels_q4_k(record: *const u8, j: usize, k: usize) -> (__m256i, __m256i) {
    use tempra_tensor::quant::interleaved_q4_k::qs_offset;
    let m4 = _mm256_set1_epi8(0x0F);
    // SAFETY: 32 bytes inside the record.
    let v = unsafe { _mm256_loadu_si256(record.add(qs_offset(j, k)) as *const __m256i) };
    (
        _mm256_and_si256(v, m4),
        _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
    )
}

/// Step `k` of chunk `j` of a Q5_KR8 record: [`levels_q4_k`]'s nibbles with the fifth
/// bits (bits `2j` and `2j + 1` of the step's `qh` run) moved to bit 4.
///
/// # Safety
///
/// `record` is a readable Q5_KR8 record; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn levels_q5_k(record: *const u8, j: usize, k: usize) -> (__m256i, __m256i) {
    use tempra_tensor::quant::interleaved_q5_k::{qh_offset, qs_offset};
    let m4 = _mm256_set1_epi8(0x0F);
    let bit4 = _mm256_set1_epi8(0x10);
    // SAFETY: 32 bytes each inside the record.
    let (v, h) = unsafe {
        (
            _mm256_loadu_si256(record.add(qs_offset(j, k)) as *const __m256i),
            _mm256_loadu_si256(record.add(qh_offset(k)) as *const __m256i),
        )
    };
    // Bits 2j and 2j + 1 down to bits 0 and 1 of their own byte (a 16-bit shift by at
    // most 6 moves the high byte's bits only into the low byte's bits 2.. and up, which
    // the masks below drop), then to bit 4.
    let h = _mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * j as i32));
    (
        _mm256_or_si256(
            _mm256_and_si256(v, m4),
            _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
            _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4),
        ),
    )
}
