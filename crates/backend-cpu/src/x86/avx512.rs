//! The AVX-512 (F, BW, VL; with AVX2, FMA, F16C) [`Simd`] token: 16 f32 lanes in a
//! `__m512`, masks in a `__mmask16`.

use std::arch::x86_64::*;

use crate::simd::Simd;

/// Proof that the CPU has AVX-512 F, BW and VL plus AVX2, FMA and F16C.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// The token.
    ///
    /// # Safety
    ///
    /// The CPU must have every feature of [`crate::isa::Isa::Avx512`].
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Avx512 {
        Avx512(())
    }
}

/// The sign bit of every lane.
const SIGN: i32 = i32::MIN;

// SAFETY (for every `unsafe` block in this impl): an `Avx512` token exists only on a CPU
// with AVX-512 F/BW/VL, AVX2, FMA and F16C (see `Avx512::new_unchecked`); every pointer
// access is to a slice first cut to the exact length read or written (`&src[..16]`
// panics when shorter), and `loadu`/`storeu` accept any alignment.
impl Simd for Avx512 {
    type V = __m512;
    type M = __mmask16;
    const LANES: usize = 16;

    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> __m512 {
        let src = &src[..16];
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe { _mm512_loadu_ps(src.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: __m512) {
        let dst = &mut dst[..16];
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), v) }
    }
    #[inline(always)]
    unsafe fn load_ptr(self, src: *const f32) -> __m512 {
        // SAFETY: the caller guarantees 16 readable f32 (see the trait).
        unsafe { _mm512_loadu_ps(src) }
    }
    #[inline(always)]
    unsafe fn load_f16_ptr(self, src: *const u16) -> __m512 {
        // SAFETY: the caller guarantees 16 readable u16 (see the trait).
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(src.cast())) }
    }
    #[inline(always)]
    fn load_f16(self, src: &[u16]) -> __m512 {
        let src = &src[..16];
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(src.as_ptr().cast())) }
    }
    #[inline(always)]
    fn store_f16(self, dst: &mut [u16], v: __m512) {
        let dst = &mut dst[..16];
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe {
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            _mm256_storeu_si256(dst.as_mut_ptr().cast(), h)
        }
    }
    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> __m512 {
        let src = &src[..16];
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe {
            let wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(src.as_ptr().cast()));
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(wide))
        }
    }
    #[inline(always)]
    fn store_bf16(self, dst: &mut [u16], v: __m512) {
        let dst = &mut dst[..16];
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe {
            let bits = _mm512_castps_si512(v);
            let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
            let rounded = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd);
            let rounded = _mm512_srli_epi32::<16>(rounded);
            let quiet = _mm512_or_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(0x40));
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            let halves = _mm512_mask_blend_epi32(nan, rounded, quiet);
            _mm256_storeu_si256(dst.as_mut_ptr().cast(), _mm512_cvtepi32_epi16(halves));
        }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_sqrt_ps(a) }
    }
    #[inline(always)]
    fn abs(self, a: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_abs_ps(a) }
    }
    #[inline(always)]
    fn neg(self, a: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe {
            _mm512_castsi512_ps(_mm512_xor_si512(
                _mm512_castps_si512(a),
                _mm512_set1_epi32(SIGN),
            ))
        }
    }
    #[inline(always)]
    fn copysign(self, a: __m512, sign: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe {
            let mask = _mm512_set1_epi32(SIGN);
            let magnitude = _mm512_andnot_si512(mask, _mm512_castps_si512(a));
            let s = _mm512_and_si512(mask, _mm512_castps_si512(sign));
            _mm512_castsi512_ps(_mm512_or_si512(magnitude, s))
        }
    }
    #[inline(always)]
    fn round(self, a: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a) }
    }
    #[inline(always)]
    fn floor(self, a: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(a) }
    }
    #[inline(always)]
    fn pow2i(self, n: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe {
            let e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
            _mm512_castsi512_ps(_mm512_slli_epi32::<23>(e))
        }
    }
    #[inline(always)]
    fn frexp(self, a: __m512) -> (__m512, __m512) {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe {
            let bits = _mm512_castps_si512(a);
            let m = _mm512_or_si512(
                _mm512_and_si512(bits, _mm512_set1_epi32(0x807f_ffffu32 as i32)),
                _mm512_set1_epi32(0x3f00_0000),
            );
            let e = _mm512_sub_epi32(
                _mm512_and_si512(_mm512_srli_epi32::<23>(bits), _mm512_set1_epi32(0xff)),
                _mm512_set1_epi32(126),
            );
            (_mm512_castsi512_ps(m), _mm512_cvtepi32_ps(e))
        }
    }
    #[inline(always)]
    fn lt(self, a: __m512, b: __m512) -> __mmask16 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: __m512, b: __m512) -> __mmask16 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b) }
    }
    #[inline(always)]
    fn unord(self, a: __m512, b: __m512) -> __mmask16 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __mmask16, a: __m512, b: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_mask_blend_ps(m, b, a) }
    }
    #[inline(always)]
    fn first_set(self, m: __mmask16) -> Option<usize> {
        (m != 0).then(|| m.trailing_zeros() as usize)
    }
    #[inline(always)]
    fn swap_pairs(self, a: __m512) -> __m512 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_permute_ps::<0b1011_0001>(a) }
    }
    #[inline(always)]
    fn reduce_add(self, a: __m512) -> f32 {
        // Halves first, then the AVX2 order: the same association as `reduce_add_x8`.
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe {
            let lo = _mm512_castps512_ps256(a);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(a)));
            let x = _mm256_add_ps(lo, hi);
            let x = _mm256_hadd_ps(x, x);
            let x = _mm256_hadd_ps(x, x);
            _mm_cvtss_f32(_mm_add_ss(
                _mm256_castps256_ps128(x),
                _mm256_extractf128_ps::<1>(x),
            ))
        }
    }
    #[inline(always)]
    fn reduce_add_x8(self, v: [__m512; 8]) -> [f32; 8] {
        let mut out = [0f32; 8];
        // SAFETY: see the impl comment; `out` holds 8 f32. Each vector is first folded to
        // 256 bits (its two halves added), then reduced by the AVX2 tree.
        // A plain loop, not `v.map(..)`: a closure does not inherit the caller's target
        // features, so its intrinsics were left as calls (a visible share of decode in
        // `attend_tile_rows` under perf).
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe {
            let mut halves = [_mm256_setzero_ps(); 8];
            for (half, &x) in halves.iter_mut().zip(&v) {
                let lo = _mm512_castps512_ps256(x);
                let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)));
                *half = _mm256_add_ps(lo, hi);
            }
            _mm256_storeu_ps(out.as_mut_ptr(), super::avx2::hadd_x8(halves));
        }
        out
    }
    #[inline(always)]
    fn reduce_max(self, a: __m512) -> f32 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_reduce_max_ps(a) }
    }
    #[inline(always)]
    fn reduce_min(self, a: __m512) -> f32 {
        // SAFETY: the token proves the CPU has the AVX-512 features (impl comment).
        unsafe { _mm512_reduce_min_ps(a) }
    }
}
