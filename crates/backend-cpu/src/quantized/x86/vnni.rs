//! VNNI variants of the AVX2 products: `vpdpbusd` sums four u8 × i8 products into each
//! i32 lane in one instruction, where AVX2 needs `maddubs` (pairs into i16) and `madd`
//! (pairs of those into i32); `vpdpwssd` adds the i16 pairs of a `madd` into an i32
//! accumulator in one instruction. Two encodings: AVX-VNNI (VEX, 256-bit; Alder Lake and
//! later, Zen 5) and AVX-512 VNNI on 256-bit vectors (EVEX with VL; Ice Lake, Sapphire
//! Rapids, Zen 4). The interleaved products use them: Q4_0R8 and Q8_0R8 for their
//! block-column sums (Q8_0R8 on 512-bit vectors at the AVX-512 level, see `q8_0_sums`),
//! Q4KR8/Q5KR8/Q6KR8 for their sub-block steps, scaled once per sub-block by `vpmulld`.
//! The row-major dots: the 32-value formats take `vpdpbusd` for their block sums
//! (`legacy`); the K-quants keep `maddubs` (its i16 pairs are what the sub-block scales
//! multiply) and fold the scaling `madd` and the add into one `vpdpwssd` (`kquants`).

use std::arch::x86_64::*;

use super::{interleaved, kquants, legacy, q4_0_sums, q6_k_r8};
use crate::isa::CpuFeatures;
use crate::quantized::kernels::QuantKernels;

/// `acc + Σ4 u · s` per i32 lane (u8 × i8, four consecutive bytes), AVX-VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) fn dpbusd_avx(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_avx_epi32(acc, u, s)
}

/// [`dpbusd_avx`] with the AVX-512 VNNI encoding (256-bit, VL).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn dpbusd_avx512(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(acc, u, s)
}

/// `acc + madd(s, p)` (i16 pairs into i32 lanes), AVX-VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) fn dpwssd_avx(acc: __m256i, s: __m256i, p: __m256i) -> __m256i {
    _mm256_dpwssd_avx_epi32(acc, s, p)
}

/// [`dpwssd_avx`] with the AVX-512 VNNI encoding (256-bit, VL).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn dpwssd_avx512(acc: __m256i, s: __m256i, p: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, s, p)
}

/// Σ of four consecutive u8 × i8 products per i32 lane, AVX-VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) fn sums_avx(u: __m256i, s: __m256i) -> __m256i {
    dpbusd_avx(_mm256_setzero_si256(), u, s)
}

/// [`sums_avx`] with the AVX-512 VNNI encoding (256-bit, VL).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(super) fn sums_avx512(u: __m256i, s: __m256i) -> __m256i {
    dpbusd_avx512(_mm256_setzero_si256(), u, s)
}

/// `lo · a_lo + hi · a_hi` (u8 × i8) in i32 lanes of four consecutive bytes, AVX-VNNI.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn avx_vnni_pair(lo: __m256i, a_lo: __m256i, hi: __m256i, a_hi: __m256i) -> __m256i {
    dpbusd_avx(dpbusd_avx(_mm256_setzero_si256(), lo, a_lo), hi, a_hi)
}

/// [`avx_vnni_pair`] with the AVX-512 VNNI encoding (256-bit, VL).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn avx512_vnni_pair(lo: __m256i, a_lo: __m256i, hi: __m256i, a_hi: __m256i) -> __m256i {
    dpbusd_avx512(dpbusd_avx512(_mm256_setzero_si256(), lo, a_lo), hi, a_hi)
}

q4_0_sums!(
    q4_0_eight_row_sums_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    avx_vnni_pair
);
q4_0_sums!(
    q4_0_eight_row_sums_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    avx512_vnni_pair
);

/// Which `vpdpbusd` encoding a table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vnni {
    /// AVX-VNNI (VEX): needs no AVX-512.
    Avx,
    /// AVX-512 VNNI with VL (EVEX).
    Avx512,
}

impl Vnni {
    /// Whether this CPU runs this encoding with the AVX2 set the kernels also use (as
    /// [`CpuFeatures`] reports them).
    pub(crate) fn detected(self) -> bool {
        let features = CpuFeatures::detect();
        match self {
            Vnni::Avx => features.avx_vnni,
            Vnni::Avx512 => features.avx512_vnni,
        }
    }
}

/// The AVX2 table `base` with the VNNI products of encoding `vnni`, if this CPU has it.
pub(crate) fn table(base: QuantKernels, vnni: Vnni) -> Option<QuantKernels> {
    if !vnni.detected() {
        return None;
    }
    let (name, products, legacy_dots, k_quant_dots) = match vnni {
        Vnni::Avx => (
            "avx2+avx-vnni",
            [
                interleaved::GEMM_Q4_0_R8_AVX_VNNI,
                interleaved::GEMM_Q8_0_R8_AVX_VNNI,
                interleaved::GEMM_Q4_K_R8_AVX_VNNI,
                interleaved::GEMM_Q5_K_R8_AVX_VNNI,
                q6_k_r8::GEMM_Q6_K_R8_AVX_VNNI,
            ],
            legacy::avx_vnni::DOTS,
            kquants::avx_vnni::DOTS,
        ),
        Vnni::Avx512 => (
            "avx2+avx512-vnni",
            [
                interleaved::GEMM_Q4_0_R8_AVX512_VNNI,
                interleaved::GEMM_Q8_0_R8_AVX512_VNNI,
                interleaved::GEMM_Q4_K_R8_AVX512_VNNI,
                interleaved::GEMM_Q5_K_R8_AVX512_VNNI,
                q6_k_r8::GEMM_Q6_K_R8_AVX512_VNNI,
            ],
            legacy::avx512_vnni::DOTS,
            kquants::avx512_vnni::DOTS,
        ),
    };
    Some(
        base.renamed(name)
            .with_interleaved(products)
            .with_dots(&legacy_dots)
            .with_dots(&k_quant_dots),
    )
}
