//! The Q6_K group product (records in `crate::interleaved::q6_k`): eight weight rows
//! against one to four Q8_K activation rows, every 32-bit lane one row throughout, as
//! for Q4_K.
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

use std::arch::x86_64::*;

use super::super::vectors::{broadcast_run, prefetch_record, store_lanes};
use super::super::{GroupProduct, IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use crate::interleaved::q6_k::{D, RECORD, SCALES, step_offset};
use crate::quantized::kernels::ActRow;
use crate::x86::Avx2;

/// Cache lines prefetched per quarter of a record (1680 / 4 = 420 bytes).
const QUARTER_LINES: usize = 420_usize.div_ceil(64);

/// The four quant vectors of the step at `p` (values `l`, `l + 32`, `l + 64`, `l + 96`
/// of each row, as `q + 32` in 0..64).
///
/// # Safety
///
/// 96 readable bytes at `p`.
#[inline(always)]
unsafe fn step_quants(_: Avx2, p: *const u8) -> [__m256i; 4] {
    // SAFETY: 96 readable bytes at `p`; the token proves AVX2.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m30 = _mm256_set1_epi8(0x30);
        let a = _mm256_loadu_si256(p as *const __m256i);
        let b = _mm256_loadu_si256(p.add(32) as *const __m256i);
        let h = _mm256_loadu_si256(p.add(64) as *const __m256i);
        // The high bits move to bits 4..6 of their own byte: 16-bit shifts carry bits
        // across the byte boundary only into positions the 0x30 mask drops.
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
}

/// The eight rows' i8 scales of sub-block `s`: as i32 lanes (`wide`, for `vpmulld`) or
/// as 16-bit pairs `(sc, sc)` per lane (for `madd`).
///
/// # Safety
///
/// `record` is a readable Q6_K record.
#[inline(always)]
unsafe fn scales(_: Avx2, record: *const u8, s: usize, wide: bool) -> __m256i {
    // SAFETY: 8 bytes inside the record's scales; the token proves AVX2.
    unsafe {
        let x = _mm_loadl_epi64(record.add(SCALES + 8 * s) as *const __m128i);
        if wide {
            _mm256_cvtepi8_epi32(x)
        } else {
            _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, x))
        }
    }
}

/// Adds one record's products to `acc`: `sums` are each row's `Σ s·(q + 32)·y`; the
/// `+ 32` is taken off against the activation's 16-value sums, then the rows' `d` and
/// the activation's scale apply.
///
/// # Safety
///
/// `record` is a readable Q6_K record and each `a[r]` a readable Q8_K block.
#[inline(always)]
unsafe fn finish_record<I: IntDots, const R: usize>(
    isa: I,
    record: *const u8,
    a: &[*const u8; R],
    sums: &[__m256i; R],
    acc: &mut [__m256; R],
) {
    let s = isa.avx2();
    // SAFETY: the function's contract; the token proves AVX2, FMA and F16C.
    unsafe {
        // Σ_s sc_s · bsum_s per row, two sub-blocks per `madd`: the rows' (sc_2p,
        // sc_2p+1) pairs against the activation's (bsum_2p, bsum_2p+1), one i32 load.
        let mut offsets = [_mm256_setzero_si256(); R];
        for p in 0..8 {
            let v = _mm_loadu_si128(record.add(SCALES + 16 * p) as *const __m128i);
            let sc = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, _mm_srli_si128::<8>(v)));
            for r in 0..R {
                let bs = broadcast_run(s, a[r].add(Q8K_BSUMS + 4 * p));
                offsets[r] = isa.dpwssd(offsets[r], sc, bs);
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
/// per row) to each row's `Σ s·(q + 32)·y` in `sums`, on AVX2: two steps summed in 16
/// bits (each at most 2 · 63 · 128), then one `madd` with the scales doubled into pairs.
///
/// # Safety
///
/// `record` is a readable Q6_K record and each `a[r]` a readable Q8_K block.
#[inline(always)]
unsafe fn quarter_in_pairs<const R: usize>(
    s: Avx2,
    record: *const u8,
    n: usize,
    h: usize,
    a: &[*const u8; R],
    sums: &mut [__m256i; R],
) {
    // SAFETY: the function's contract; the token proves AVX2.
    unsafe {
        let mut sc = [_mm256_setzero_si256(); 4];
        for (i, sc) in sc.iter_mut().enumerate() {
            *sc = scales(s, record, 8 * n + h + 2 * i, false);
        }
        for pair in 0..2 {
            let mut part = [[_mm256_setzero_si256(); R]; 4];
            for t in 4 * h + 2 * pair..4 * h + 2 * pair + 2 {
                let q = step_quants(s, record.add(step_offset(n, t)));
                for r in 0..R {
                    let at = a[r].add(Q8K_QS + 128 * n + 4 * t);
                    for i in 0..4 {
                        let y = broadcast_run(s, at.add(32 * i));
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

/// [`quarter_in_pairs`] with VNNI: four chains of four `vpdpbusd` steps in i32 lanes, one
/// `vpmulld` per sub-block.
///
/// # Safety
///
/// As [`quarter_in_pairs`].
#[inline(always)]
unsafe fn quarter_in_i32<I: IntDots, const R: usize>(
    isa: I,
    record: *const u8,
    n: usize,
    h: usize,
    a: &[*const u8; R],
    sums: &mut [__m256i; R],
) {
    let s = isa.avx2();
    // SAFETY: the function's contract; the token proves AVX2.
    unsafe {
        let mut sub = [[_mm256_setzero_si256(); R]; 4];
        for t in 4 * h..4 * h + 4 {
            let q = step_quants(s, record.add(step_offset(n, t)));
            for r in 0..R {
                let at = a[r].add(Q8K_QS + 128 * n + 4 * t);
                for i in 0..4 {
                    sub[i][r] = isa.dpbusd(sub[i][r], q[i], broadcast_run(s, at.add(32 * i)));
                }
            }
        }
        for i in 0..4 {
            let sc = scales(s, record, 8 * n + h + 2 * i, true);
            for r in 0..R {
                sums[r] = _mm256_add_epi32(sums[r], _mm256_mullo_epi32(sub[i][r], sc));
            }
        }
    }
}

/// The Q6_K group product.
pub(in crate::quantized::x86) struct Q6KGroup;

impl GroupProduct for Q6KGroup {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        let s = isa.avx2();
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group and super-block `b` of each activation
            // row (the `GemmR8Fn` contract); the token proves AVX2.
            unsafe {
                let record = w.add(b * RECORD);
                let mut a = [std::ptr::null::<u8>(); R];
                for (r, a) in a.iter_mut().enumerate() {
                    *a = acts.get_unchecked(r).blocks.add(b * Q8K_BYTES);
                }
                let mut sums = [_mm256_setzero_si256(); R];
                for n in 0..2 {
                    for h in 0..2 {
                        prefetch_record(s, record.add(RECORD / 4 * (2 * n + h)), QUARTER_LINES);
                        if I::VNNI {
                            quarter_in_i32(isa, record, n, h, &a, &mut sums);
                        } else {
                            quarter_in_pairs(s, record, n, h, &a, &mut sums);
                        }
                    }
                }
                finish_record(isa, record, &a, &sums, &mut acc);
            }
        }
        store_lanes(s, &acc, out);
    }
}
