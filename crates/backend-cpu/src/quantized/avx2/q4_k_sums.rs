//! The integer steps of the Q4_KR8 product (`interleaved`'s kernel): each 32-bit lane
//! belongs to one of the group's eight rows. Two arithmetics:
//!
//! - AVX2: a step's `maddubs` (u8 × i8 pairs → i16) is added in 16 bits (a 32-value
//!   sub-block reaches at most 8 · 2 · 15 · 128 = 30720), and one `madd` per sub-block
//!   with the rows' scales, each byte doubled to fill a lane's two 16-bit halves,
//!   widens to i32.
//! - VNNI: a step's `vpdpbusd` adds four products straight into the i32 lane, and the
//!   sub-block ends with one `vpmulld` by the rows' scales widened to 32 bits (the step
//!   is `vnni::dpbusd_avx` / `dpbusd_avx512`): two
//!   fewer instructions per step (no `maddubs` + add pair), one more per sub-block.

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
pub(super) fn finish_madd(lo: __m256i, sc_lo: __m256i, hi: __m256i, sc_hi: __m256i) -> __m256i {
    _mm256_add_epi32(_mm256_madd_epi16(lo, sc_lo), _mm256_madd_epi16(hi, sc_hi))
}

/// The two sub-blocks' 32-bit sums times their scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn finish_mullo(lo: __m256i, sc_lo: __m256i, hi: __m256i, sc_hi: __m256i) -> __m256i {
    _mm256_add_epi32(_mm256_mullo_epi32(lo, sc_lo), _mm256_mullo_epi32(hi, sc_hi))
}
