//! Products over the row-interleaved Q6_K layout [`DType::Q6KR8`] (layout in
//! `tempra_tensor::quant::interleaved_q6_k`): eight weight rows against one to four Q8_K
//! activation rows, every 32-bit lane one row throughout, as for Q4KR8.
//!
//! Per step (96 bytes: four values at each of four positions per row) the 6-bit quants
//! are rebuilt from the low-bits runs and the high-bits run (17 bitwise operations for
//! four vectors) and each is multiplied against a 4-byte activation run broadcast to all
//! lanes. Four steps complete four 16-value sub-blocks for the eight rows, each scaled
//! once by the rows' i8 scales:
//!
//! - AVX2: `maddubs` (u8 × i8 pairs into i16; a step is at most 2 · 63 · 128, so two
//!   steps still fit), then one `madd` per pair of steps with the scales doubled into
//!   16-bit pairs;
//! - VNNI: `vpdpbusd` straight into i32 lanes, one `vpmulld` per sub-block.
//!
//! The quants are stored as `q + 32` (0..64): the product is `Σ s·(q + 32)·y − 32·Σ
//! s·bsum`, the correction taken once per record from the activation's 16-value sums
//! (one `madd` per pair of sub-blocks). The row-major Q6_K dot this replaces for decode
//! read weights in cache barely faster than memory delivers them: the decode GEMV was
//! compute bound.
//!
//! [`DType::Q6KR8`]: tempra_tensor::DType::Q6KR8

use std::arch::x86_64::*;

use tempra_tensor::quant::interleaved_q6_k::{D, RECORD, SCALES, step_offset};

use super::interleaved::{prefetch_ahead, store_lanes};
use super::{Q8K_BSUMS, Q8K_BYTES, Q8K_QS, rows_dispatch, vnni};
use crate::quantized::kernels::{ActRow, GemmR8Fn};

/// Q6_KR8 weights × one to four Q8_K activation rows.
pub(super) const GEMM_Q6_K_R8: GemmR8Fn = rows_dispatch!(gemm_q6_k_r8, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q6_K_R8`] with AVX-VNNI `vpdpbusd` (sub-block sums in 32 bits).
pub(super) const GEMM_Q6_K_R8_AVX_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q6_k_r8_avx_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q6_K_R8`] with AVX-512 VNNI `vpdpbusd` on 256-bit vectors.
pub(super) const GEMM_Q6_K_R8_AVX512_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q6_k_r8_avx512_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// Cache lines prefetched per quarter of a record (1680 / 4 = 420 bytes).
const QUARTER_LINES: usize = 420_usize.div_ceil(64);

/// The four quant vectors of the step at `p` (values `l`, `l + 32`, `l + 64`, `l + 96`
/// of each row, as `q + 32` in 0..64).
///
/// # Safety
///
/// 96 readable bytes at `p`; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn step_quants(p: *const u8) -> [__m256i; 4] {
    let m4 = _mm256_set1_epi8(0x0F);
    let m30 = _mm256_set1_epi8(0x30);
    // SAFETY: 96 readable bytes at `p`.
    let (a, b, h) = unsafe {
        (
            _mm256_loadu_si256(p as *const __m256i),
            _mm256_loadu_si256(p.add(32) as *const __m256i),
            _mm256_loadu_si256(p.add(64) as *const __m256i),
        )
    };
    // The high bits move to bits 4..6 of their own byte: 16-bit shifts carry bits across
    // the byte boundary only into positions the 0x30 mask drops.
    [
        _mm256_or_si256(
            _mm256_and_si256(a, m4),
            _mm256_and_si256(_mm256_slli_epi16(h, 4), m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(b, m4),
            _mm256_and_si256(_mm256_slli_epi16(h, 2), m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
            _mm256_and_si256(h, m30),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
            _mm256_and_si256(_mm256_srli_epi16(h, 2), m30),
        ),
    ]
}

/// A 4-byte activation run at `p` broadcast to every lane.
///
/// # Safety
///
/// 4 readable bytes at `p`; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn broadcast_run(p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes at `p`.
    _mm256_set1_epi32(unsafe { std::ptr::read_unaligned(p as *const i32) })
}

/// The eight rows' i8 scales of sub-block `s` as i32 lanes.
///
/// # Safety
///
/// `record` is a readable Q6_KR8 record; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales_wide(record: *const u8, s: usize) -> __m256i {
    // SAFETY: 8 bytes inside the record's scales.
    _mm256_cvtepi8_epi32(unsafe { _mm_loadl_epi64(record.add(SCALES + 8 * s) as *const __m128i) })
}

/// The eight rows' i8 scales of sub-block `s` as 16-bit pairs `(sc, sc)` per lane.
///
/// # Safety
///
/// As [`scales_wide`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales_paired(record: *const u8, s: usize) -> __m256i {
    // SAFETY: 8 bytes inside the record's scales.
    let x = unsafe { _mm_loadl_epi64(record.add(SCALES + 8 * s) as *const __m128i) };
    _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, x))
}

/// Adds one record's products to `acc`: `sums` are each row's `Σ s·(q + 32)·y`; the
/// `+ 32` is taken off against the activation's 16-value sums, then the rows' `d` and
/// the activation's scale apply.
///
/// # Safety
///
/// `record` is a readable Q6_KR8 record and each `a[r]` a readable Q8_K block; AVX2
/// present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn finish_record<const R: usize>(
    record: *const u8,
    a: &[*const u8; R],
    sums: &[__m256i; R],
    acc: &mut [__m256; R],
) {
    // SAFETY: the function's contract.
    unsafe {
        // Σ_s sc_s · bsum_s per row, two sub-blocks per `madd`: the rows' (sc_2p,
        // sc_2p+1) pairs against the activation's (bsum_2p, bsum_2p+1), one i32 load.
        let mut offsets = [_mm256_setzero_si256(); R];
        for p in 0..8 {
            let v = _mm_loadu_si128(record.add(SCALES + 16 * p) as *const __m128i);
            let sc = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, _mm_srli_si128::<8>(v)));
            for r in 0..R {
                let bs = broadcast_run(a[r].add(Q8K_BSUMS + 4 * p));
                offsets[r] = _mm256_add_epi32(offsets[r], _mm256_madd_epi16(sc, bs));
            }
        }
        let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
        for r in 0..R {
            let da = _mm256_set1_ps(std::ptr::read_unaligned(a[r] as *const f32));
            let total = _mm256_sub_epi32(sums[r], _mm256_slli_epi32::<5>(offsets[r]));
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(total), acc[r]);
        }
    }
}

/// Adds a quarter of a record (half `n`, steps `4h..4h + 4`: four 16-value sub-blocks
/// per row) to each row's `Σ s·(q + 32)·y` in `sums`, with `maddubs`: two steps summed
/// in 16 bits (each at most 2 · 63 · 128), then one `madd` with the scales doubled into
/// pairs.
///
/// # Safety
///
/// `record` is a readable Q6_KR8 record and each `a[r]` a readable Q8_K block; AVX2
/// present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quarter_maddubs<const R: usize>(
    record: *const u8,
    n: usize,
    h: usize,
    a: &[*const u8; R],
    sums: &mut [__m256i; R],
) {
    // SAFETY: the function's contract.
    unsafe {
        let mut sc = [_mm256_setzero_si256(); 4];
        for (i, sc) in sc.iter_mut().enumerate() {
            *sc = scales_paired(record, 8 * n + h + 2 * i);
        }
        for pair in 0..2 {
            let mut part = [[_mm256_setzero_si256(); R]; 4];
            for t in 4 * h + 2 * pair..4 * h + 2 * pair + 2 {
                let q = step_quants(record.add(step_offset(n, t)));
                for r in 0..R {
                    let at = a[r].add(Q8K_QS + 128 * n + 4 * t);
                    for i in 0..4 {
                        let y = broadcast_run(at.add(32 * i));
                        part[i][r] = _mm256_add_epi16(part[i][r], _mm256_maddubs_epi16(q[i], y));
                    }
                }
            }
            for i in 0..4 {
                for r in 0..R {
                    sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(part[i][r], sc[i]));
                }
            }
        }
    }
}

/// Defines `$name`, [`quarter_maddubs`] with `$dpbusd` (compiled with `$features`):
/// four chains of four steps in i32 lanes, one `vpmulld` per sub-block.
macro_rules! quarter_vnni {
    ($name:ident, $features:literal, $dpbusd:path) => {
        /// [`quarter_maddubs`] with `vpdpbusd` steps.
        ///
        /// # Safety
        ///
        /// As [`quarter_maddubs`]; the CPU has the function's features.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize>(
            record: *const u8,
            n: usize,
            h: usize,
            a: &[*const u8; R],
            sums: &mut [__m256i; R],
        ) {
            // SAFETY: the function's contract.
            unsafe {
                let mut sub = [[_mm256_setzero_si256(); R]; 4];
                for t in 4 * h..4 * h + 4 {
                    let q = step_quants(record.add(step_offset(n, t)));
                    for r in 0..R {
                        let at = a[r].add(Q8K_QS + 128 * n + 4 * t);
                        for i in 0..4 {
                            sub[i][r] = $dpbusd(sub[i][r], q[i], broadcast_run(at.add(32 * i)));
                        }
                    }
                }
                for i in 0..4 {
                    let sc = scales_wide(record, 8 * n + h + 2 * i);
                    for r in 0..R {
                        sums[r] = _mm256_add_epi32(sums[r], _mm256_mullo_epi32(sub[i][r], sc));
                    }
                }
            }
        }
    };
}

quarter_vnni!(quarter_avx_vnni, "avx2,fma,f16c,avxvnni", vnni::dpbusd_avx);
quarter_vnni!(
    quarter_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    vnni::dpbusd_avx512
);

/// Defines a Q6_KR8 × Q8_K product `$name::<R>` compiled with `$features`, each quarter
/// record summed by `$quarter`.
macro_rules! q6_k_r8_kernel {
    ($name:ident, $features:literal, $quarter:path) => {
        /// # Safety
        ///
        /// See [`GemmR8Fn`] (here each `acts[r].blocks` points to `nb` Q8_K blocks; the
        /// scales and sums pointers are not read); `acts.len() >= R`; the CPU has the
        /// kernel's features.
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[ActRow],
            out: &mut [[f32; 8]],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            for b in 0..nb {
                // SAFETY: record `b < nb` of the group and super-block `b` of each
                // activation row (the `GemmR8Fn` contract).
                unsafe {
                    let record = w.add(b * RECORD);
                    let mut a = [std::ptr::null::<u8>(); R];
                    for (r, a) in a.iter_mut().enumerate() {
                        *a = acts.get_unchecked(r).blocks.add(b * Q8K_BYTES);
                    }
                    let mut sums = [_mm256_setzero_si256(); R];
                    for n in 0..2 {
                        for h in 0..2 {
                            prefetch_ahead::<QUARTER_LINES>(record.add(RECORD / 4 * (2 * n + h)));
                            $quarter(record, n, h, &a, &mut sums);
                        }
                    }
                    finish_record(record, &a, &sums, &mut acc);
                }
            }
            store_lanes(&acc, out);
        }
    };
}

q6_k_r8_kernel!(gemm_q6_k_r8, "avx2,fma,f16c", quarter_maddubs);
q6_k_r8_kernel!(
    gemm_q6_k_r8_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    quarter_avx_vnni
);
q6_k_r8_kernel!(
    gemm_q6_k_r8_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    quarter_avx512_vnni
);
