//! The x86 quantized dot products: the AVX2 (+FMA, F16C) kernels, after ggml's AVX2
//! kernels (weights unpacked to bytes, `maddubs` (u8 × i8 pairs → i16) and `madd` (→ i32)
//! for the integer sums, one f32 FMA per block: per 32 values for the legacy formats, per
//! 256 for K-quants), and their VNNI variants (`vnni.rs`: `vpdpbusd`/`vpdpwssd` in the
//! AVX-VNNI or the AVX-512 VNNI encoding), chosen by the dispatch level.
//!
//! Each kernel takes up to four activation rows: the weight block is unpacked once and
//! dotted with every row (the prefill tile); with one row it is the decode GEMV.

mod interleaved;
mod kquants;
mod legacy;
mod q4_k_sums;
mod q6_k_r8;
mod q8_0_sums;
mod quantize;
mod vnni;

pub(crate) use vnni::{Vnni, table as vnni_table};

use std::arch::x86_64::*;

use super::kernels::QuantKernels;

/// Bytes of a Q8_K block (the K-quants' activations): `d: f32`, `qs: [i8; 256]`,
/// `bsums: [i16; 16]` (sums of 16 consecutive `qs`).
const Q8K_BYTES: usize = 292;
/// Offset of a Q8_K block's `qs`.
const Q8K_QS: usize = 4;
/// Offset of a Q8_K block's `bsums`.
const Q8K_BSUMS: usize = 260;

/// Whether this CPU runs the kernels here.
pub(crate) fn detected() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// `base` with the AVX2 kernels in place of its entries.
pub(crate) fn table(base: QuantKernels) -> QuantKernels {
    QuantKernels::patched(
        base,
        "avx2",
        quantize::quantize_activations,
        &legacy::maddubs::DOTS,
    )
    .with_dots(&kquants::maddubs::DOTS)
    // Eight-row GEMVs read the row-interleaved layouts only: over eight row-major rows
    // (eight streams) they were no faster than one-row dots from memory, while over the
    // interleaved layout (one stream) they read far faster than either.
    .with_interleaved([
        interleaved::GEMM_Q4_0_R8,
        interleaved::GEMM_Q8_0_R8,
        interleaved::GEMM_Q4_K_R8,
        interleaved::GEMM_Q5_K_R8,
        q6_k_r8::GEMM_Q6_K_R8,
    ])
}

/// Wraps `$f::<R>` (R = 1..=4 activation rows) into one function of type `$ty`
/// (`DotFn` by default, or `GemmR8Fn` with its activation and output types).
macro_rules! rows_dispatch {
    ($f:ident) => {
        rows_dispatch!($f, DotFn, *const u8, f32)
    };
    ($f:ident, $ty:ty, $act:ty, $out:ty) => {{
        /// # Safety
        ///
        /// See the function type's contract; AVX2, FMA and F16C present.
        unsafe fn entry(nb: usize, w: *const u8, acts: &[$act], out: &mut [$out]) {
            // SAFETY: forwarded contract; `R` equals `acts.len()` (1..=4).
            unsafe {
                match acts.len() {
                    1 => $f::<1>(nb, w, acts, out),
                    2 => $f::<2>(nb, w, acts, out),
                    3 => $f::<3>(nb, w, acts, out),
                    _ => $f::<4>(nb, w, acts, out),
                }
            }
        }
        entry as $ty
    }};
}
pub(crate) use rows_dispatch;

/// `N` 32-byte vectors from `p` on (a record's quants: rows or row pairs).
///
/// # Safety
///
/// `32 · N` readable bytes at `p`; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn load_vectors<const N: usize>(p: *const u8) -> [__m256i; N] {
    // SAFETY: `32 · N` readable bytes at `p`.
    std::array::from_fn(|i| unsafe { _mm256_loadu_si256(p.add(32 * i) as *const __m256i) })
}

/// An f16 at `p` (any alignment) as f32.
///
/// The value is moved in with `vmovd` from a general register: a lane insert
/// (`vpinsrw`) would merge into whatever register the allocator picks, and when that is
/// an accumulator the merge chains every block to the previous block's FMA, which made
/// the Q4_0 dot several times slower per block.
///
/// # Safety
///
/// `p` points to 2 readable bytes; F16C present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fp16(p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at `p`.
    let bits = unsafe { std::ptr::read_unaligned(p as *const u16) } as u32;
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// The product of the f16 values at `p` and `q` (both converted in one instruction).
///
/// # Safety
///
/// `p` and `q` point to 2 readable bytes each; F16C present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fp16_product(p: *const u8, q: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at each pointer.
    let (a, b) = unsafe {
        (
            std::ptr::read_unaligned(p as *const u16) as u32,
            std::ptr::read_unaligned(q as *const u16) as u32,
        )
    };
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128((a | (b << 16)) as i32));
    _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// 16 bytes at `p` split into 32 nibbles: lanes 0..16 the low nibbles, 16..32 the high.
///
/// # Safety
///
/// `p` points to 16 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibbles32(p: *const u8) -> __m256i {
    // SAFETY: 16 readable bytes.
    let lo = unsafe { _mm_loadu_si128(p as *const __m128i) };
    let both = _mm256_set_m128i(_mm_srli_epi16(lo, 4), lo);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// 32 bits at `p` spread to 32 bytes: 0xFF where the bit is set, else 0.
///
/// # Safety
///
/// `p` points to 4 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bits32(p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes.
    let x = unsafe { std::ptr::read_unaligned(p as *const u32) } as i32;
    let shuffle = _mm256_set_epi64x(
        0x0303030303030303,
        0x0202020202020202,
        0x0101010101010101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x), shuffle);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// Defines `$name(rows, a, a_sum) -> __m256i`, compiled with `$features`: the integer
/// sums of one Q4_0 block column over eight weight rows against one Q8_0 activation
/// block. `rows[p]` holds the 16 quant bytes of row `2p` (low 128 bits) and row `2p + 1`
/// (high); `a` points to the activation's 32 quants and `a_sum` is their sum. Lanes come
/// out in the order rows 0, 2, 4, 6, 1, 3, 5, 7. `$pair(lo, a_lo, hi, a_hi)` sums the
/// u8 × i8 products of both nibble halves into i32 lanes of four consecutive bytes
/// ([`maddubs_pair`] on AVX2, `vpdpbusd` in `vnni`).
///
/// Q4_0 avoids the sign trick: `Σ (q − 8)·a = Σ q·a − 8·Σ a`, with `q` the unsigned
/// nibbles (so `maddubs` and `vpdpbusd` take them as they are).
macro_rules! q4_0_sums {
    ($name:ident, $features:literal, $pair:path) => {
        /// The integer sums of one Q4_0 block column over eight weight rows (see
        /// `q4_0_sums!`).
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
                $pair(lo, a_lo, hi, a_hi)
            };
            let sums = _mm256_hadd_epi32(
                _mm256_hadd_epi32(pair(rows[0]), pair(rows[1])),
                _mm256_hadd_epi32(pair(rows[2]), pair(rows[3])),
            );
            _mm256_sub_epi32(sums, _mm256_set1_epi32(8 * a_sum))
        }
    };
}
pub(crate) use q4_0_sums;

q4_0_sums!(q4_0_eight_row_sums, "avx2,fma,f16c", maddubs_pair);

/// `lo · a_lo + hi · a_hi` (u8 × i8) in i32 lanes of four consecutive bytes: `maddubs`
/// pairs of both halves summed in 16 bits (at most 2 · 2 · 15 · 128), one `madd`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn maddubs_pair(lo: __m256i, a_lo: __m256i, hi: __m256i, a_hi: __m256i) -> __m256i {
    let s16 = _mm256_add_epi16(
        _mm256_maddubs_epi16(lo, a_lo),
        _mm256_maddubs_epi16(hi, a_hi),
    );
    _mm256_madd_epi16(s16, _mm256_set1_epi16(1))
}

/// Σ of four consecutive `ux` (unsigned bytes) × `sy` (signed bytes) per i32 lane:
/// `maddubs` pairs into i16 (saturating only past 2 · 255 · 127, beyond every format's
/// levels), `madd` by ones into i32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn maddubs_sums(ux: __m256i, sy: __m256i) -> __m256i {
    let pairs = _mm256_maddubs_epi16(ux, sy);
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// `acc + madd(s, p)`: the i16 pairs of `s · p` summed into `acc`'s i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn madd_add(acc: __m256i, s: __m256i, p: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(s, p))
}

/// The sum of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum(v: __m256) -> f32 {
    hsum128(_mm_add_ps(
        _mm256_castps256_ps128(v),
        _mm256_extractf128_ps(v, 1),
    ))
}

/// The sum of the 4 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum128(v: __m128) -> f32 {
    let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// The activation row pointers as an array.
///
/// # Safety
///
/// `acts.len() >= R`.
#[inline(always)]
pub(super) unsafe fn rows<const R: usize>(acts: &[*const u8]) -> [*const u8; R] {
    debug_assert!(acts.len() >= R);
    // SAFETY: the caller guarantees `R` entries.
    std::array::from_fn(|r| unsafe { *acts.get_unchecked(r) })
}
