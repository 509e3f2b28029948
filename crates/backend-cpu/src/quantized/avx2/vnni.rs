//! VNNI variants of the AVX2 products: `vpdpbusd` sums four u8 × i8 products into each
//! i32 lane in one instruction, where AVX2 needs `maddubs` (pairs into i16) and `madd`
//! (pairs of those into i32). Two encodings: AVX-VNNI (VEX, 256-bit; Alder Lake and
//! later, Zen 5) and AVX-512 VNNI on 256-bit vectors (EVEX with VL; Ice Lake, Sapphire
//! Rapids, Zen 4). Only the Q4_0R8 product uses them so far: its block columns are pure
//! integer sums (the K-quant kernels sum in 16 bits before one `madd` with the
//! sub-block scales, which `vpdpbusd` would not shorten).

use std::arch::x86_64::*;

use super::interleaved;
use crate::quantized::kernels::QuantKernels;

/// Defines the VNNI twin of `super::q4_0_eight_row_sums` (same contract, same lane
/// order) compiled with `$features` around the `vpdpbusd` intrinsic `$dp`.
macro_rules! q4_0_sums {
    ($name:ident, $features:literal, $dp:ident) => {
        /// The integer sums of one Q4_0 block column over eight weight rows against one
        /// Q8_0 activation block (see `q4_0_eight_row_sums`), with `vpdpbusd`.
        ///
        /// # Safety
        ///
        /// 32 readable bytes at `a`; the CPU has the function's features.
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name(rows: [__m256i; 4], a: *const u8, a_sum: i32) -> __m256i {
            let low = _mm256_set1_epi8(0x0F);
            // SAFETY: 32 readable bytes at `a`.
            let (a_lo, a_hi) = unsafe {
                (
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(a as *const __m128i)),
                    _mm256_broadcastsi128_si256(_mm_loadu_si128(a.add(16) as *const __m128i)),
                )
            };
            let pair = |v: __m256i| {
                let lo = _mm256_and_si256(v, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                // Lanes 0..4: partial sums of row 2p; lanes 4..8: of row 2p + 1.
                $dp($dp(_mm256_setzero_si256(), lo, a_lo), hi, a_hi)
            };
            let sums = _mm256_hadd_epi32(
                _mm256_hadd_epi32(pair(rows[0]), pair(rows[1])),
                _mm256_hadd_epi32(pair(rows[2]), pair(rows[3])),
            );
            _mm256_sub_epi32(sums, _mm256_set1_epi32(8 * a_sum))
        }
    };
}

q4_0_sums!(
    q4_0_eight_row_sums_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    _mm256_dpbusd_avx_epi32
);
q4_0_sums!(
    q4_0_eight_row_sums_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    _mm256_dpbusd_epi32
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
    /// Whether this CPU runs this encoding (with the AVX2 set the kernels also use).
    pub(crate) fn detected(self) -> bool {
        super::detected()
            && match self {
                Vnni::Avx => is_x86_feature_detected!("avxvnni"),
                Vnni::Avx512 => {
                    is_x86_feature_detected!("avx512f")
                        && is_x86_feature_detected!("avx512vl")
                        && is_x86_feature_detected!("avx512vnni")
                }
            }
    }
}

/// The AVX2 table `base` with the VNNI products of encoding `vnni`, if this CPU has it.
pub(crate) fn table(base: QuantKernels, vnni: Vnni) -> Option<QuantKernels> {
    if !vnni.detected() {
        return None;
    }
    let (name, q4_0) = match vnni {
        Vnni::Avx => ("avx2+avx-vnni", interleaved::GEMM_Q4_0_R8_AVX_VNNI),
        Vnni::Avx512 => ("avx2+avx512-vnni", interleaved::GEMM_Q4_0_R8_AVX512_VNNI),
    };
    let q4_k = base.gemm_r8(tempra_tensor::DType::Q4KR8)?;
    Some(base.renamed(name).with_interleaved(q4_0, q4_k))
}
