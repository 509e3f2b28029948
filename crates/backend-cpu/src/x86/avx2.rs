//! The AVX2 + FMA + F16C [`Simd`] token: 8 f32 lanes in a `__m256`.

use std::arch::x86_64::*;

use crate::simd::Simd;

/// Proof that the CPU has AVX2, FMA and F16C.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2, FMA and F16C ([`crate::isa::Isa::Avx2`] available).
    #[inline(always)]
    pub(crate) unsafe fn new_unchecked() -> Avx2 {
        Avx2(())
    }
}

/// The sign bit of every lane.
const SIGN: i32 = i32::MIN;

/// `[Σ v0, Σ v1, .., Σ v7]` with a tree of horizontal adds (10 instructions instead of
/// eight separate lane reductions).
#[inline(always)]
pub(crate) fn hadd_x8(v: [__m256; 8]) -> __m256 {
    // SAFETY: only reached from code compiled for AVX (an `Avx2` or `Avx512` token).
    unsafe {
        let t0 = _mm256_hadd_ps(v[0], v[1]);
        let t1 = _mm256_hadd_ps(v[2], v[3]);
        let t2 = _mm256_hadd_ps(v[4], v[5]);
        let t3 = _mm256_hadd_ps(v[6], v[7]);
        let u0 = _mm256_hadd_ps(t0, t1); // [a b c d | a b c d] partial sums, low and high halves
        let u1 = _mm256_hadd_ps(t2, t3); // [e f g h | e f g h]
        let lo = _mm256_permute2f128_ps::<0x20>(u0, u1);
        let hi = _mm256_permute2f128_ps::<0x31>(u0, u1);
        _mm256_add_ps(lo, hi)
    }
}

// SAFETY (for every `unsafe` block in this impl): an `Avx2` token exists only on a CPU
// with AVX2, FMA and F16C (see `Avx2::new_unchecked`), so the intrinsics' target
// features are present; every pointer access is to a slice first cut to the exact
// length read or written (`&src[..8]` panics when shorter), and `loadu`/`storeu` accept
// any alignment.
impl Simd for Avx2 {
    type V = __m256;
    type M = __m256;
    const LANES: usize = 8;

    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> __m256 {
        let src = &src[..8];
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe { _mm256_loadu_ps(src.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: __m256) {
        let dst = &mut dst[..8];
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), v) }
    }
    #[inline(always)]
    unsafe fn load_ptr(self, src: *const f32) -> __m256 {
        // SAFETY: the caller guarantees 8 readable f32 (see the trait).
        unsafe { _mm256_loadu_ps(src) }
    }
    #[inline(always)]
    unsafe fn load_f16_ptr(self, src: *const u16) -> __m256 {
        // SAFETY: the caller guarantees 8 readable u16 (see the trait).
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(src.cast())) }
    }
    #[inline(always)]
    fn load_f16(self, src: &[u16]) -> __m256 {
        let src = &src[..8];
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr().cast())) }
    }
    #[inline(always)]
    fn store_f16(self, dst: &mut [u16], v: __m256) {
        let dst = &mut dst[..8];
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe {
            _mm_storeu_si128(
                dst.as_mut_ptr().cast(),
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v),
            )
        }
    }
    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> __m256 {
        let src = &src[..8];
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe {
            let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(src.as_ptr().cast()));
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
        }
    }
    #[inline(always)]
    fn store_bf16(self, dst: &mut [u16], v: __m256) {
        let dst = &mut dst[..8];
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment); memory is
        // only accessed through the slice cut to the vector length above.
        unsafe {
            let bits = _mm256_castps_si256(v);
            let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
            let rounded = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd);
            let rounded = _mm256_srli_epi32::<16>(rounded);
            let quiet = _mm256_or_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(0x40));
            let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            let halves = _mm256_blendv_epi8(rounded, quiet, nan);
            // Pack the eight 32-bit lanes (all < 2^16) into 16 bits, then gather the two
            // 64-bit halves that hold them into the low 128 bits.
            let packed = _mm256_packus_epi32(halves, halves);
            let ordered = _mm256_permute4x64_epi64::<0b1000>(packed);
            _mm_storeu_si128(dst.as_mut_ptr().cast(), _mm256_castsi256_si128(ordered));
        }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_sqrt_ps(a) }
    }
    #[inline(always)]
    fn abs(self, a: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_set1_epi32(SIGN)), a) }
    }
    #[inline(always)]
    fn neg(self, a: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_xor_ps(_mm256_castsi256_ps(_mm256_set1_epi32(SIGN)), a) }
    }
    #[inline(always)]
    fn copysign(self, a: __m256, sign: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe {
            let mask = _mm256_castsi256_ps(_mm256_set1_epi32(SIGN));
            _mm256_or_ps(_mm256_andnot_ps(mask, a), _mm256_and_ps(mask, sign))
        }
    }
    #[inline(always)]
    fn round(self, a: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a) }
    }
    #[inline(always)]
    fn floor(self, a: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_floor_ps(a) }
    }
    #[inline(always)]
    fn pow2i(self, n: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe {
            let e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e))
        }
    }
    #[inline(always)]
    fn frexp(self, a: __m256) -> (__m256, __m256) {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe {
            let bits = _mm256_castps_si256(a);
            let m = _mm256_or_si256(
                _mm256_and_si256(bits, _mm256_set1_epi32(0x807f_ffffu32 as i32)),
                _mm256_set1_epi32(0x3f00_0000),
            );
            let e = _mm256_sub_epi32(
                _mm256_and_si256(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(0xff)),
                _mm256_set1_epi32(126),
            );
            (_mm256_castsi256_ps(m), _mm256_cvtepi32_ps(e))
        }
    }
    #[inline(always)]
    fn lt(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b) }
    }
    #[inline(always)]
    fn unord(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __m256, a: __m256, b: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_blendv_ps(b, a, m) }
    }
    #[inline(always)]
    fn first_set(self, m: __m256) -> Option<usize> {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        let bits = unsafe { _mm256_movemask_ps(m) } as u32;
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
    #[inline(always)]
    fn swap_pairs(self, a: __m256) -> __m256 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe { _mm256_permute_ps::<0b1011_0001>(a) }
    }
    #[inline(always)]
    fn reduce_add(self, a: __m256) -> f32 {
        // The same association as `hadd_x8`, so one row reduces to the same bits alone or
        // in a group of eight: ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)).
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe {
            let x = _mm256_hadd_ps(a, a);
            let x = _mm256_hadd_ps(x, x);
            _mm_cvtss_f32(_mm_add_ss(
                _mm256_castps256_ps128(x),
                _mm256_extractf128_ps::<1>(x),
            ))
        }
    }
    #[inline(always)]
    fn reduce_add_x8(self, v: [__m256; 8]) -> [f32; 8] {
        let mut out = [0f32; 8];
        // SAFETY: see the impl comment; `out` holds 8 f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), hadd_x8(v)) };
        out
    }
    #[inline(always)]
    fn reduce_max(self, a: __m256) -> f32 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe {
            let x = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
            let x = _mm_max_ps(x, _mm_movehl_ps(x, x));
            let x = _mm_max_ss(x, _mm_movehdup_ps(x));
            _mm_cvtss_f32(x)
        }
    }
    #[inline(always)]
    fn reduce_min(self, a: __m256) -> f32 {
        // SAFETY: the token proves the CPU has the AVX2/FMA/F16C features (impl comment).
        unsafe {
            let x = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
            let x = _mm_min_ps(x, _mm_movehl_ps(x, x));
            let x = _mm_min_ss(x, _mm_movehdup_ps(x));
            _mm_cvtss_f32(x)
        }
    }
}
