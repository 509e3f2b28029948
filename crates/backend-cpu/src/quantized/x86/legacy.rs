//! AVX2 dot products for the 32-value formats: Q4_0, Q5_0, Q8_0 against Q8_0 activations
//! and Q4_1, Q5_1 against Q8_1.
//!
//! Block layouts (bytes): Q4_0 `d:f16 qs[16]` (18), Q4_1 `d m qs[16]` (20), Q5_0
//! `d qh[4] qs[16]` (22), Q5_1 `d m qh[4] qs[16]` (24), Q8_0 `d qs[32]` (34), Q8_1
//! `d s qs[32]` (36).
//!
//! The kernels are written once over the integer sum of a block (`legacy_dots!`) and
//! compiled per instruction set: [`maddubs`] (`maddubs` pairs into i16, `madd` by ones
//! into i32: two instructions per 32 products) and, in `vnni`, `vpdpbusd` (one).

use std::arch::x86_64::*;

use tempra_tensor::DType;

use super::{bits32, fp16, fp16_product, hsum, nibbles32, rows, rows_dispatch};
use crate::quantized::kernels::DotFn;

/// How far ahead of the current block the weight row is prefetched (one hint per block).
const PREFETCH_BYTES: usize = 4096;

/// Runs `$body` over the blocks of a 32-value format with weight block size `$wb` and
/// activation block size `$ab`; `$body` adds into `$acc` (`&mut [__m256; R]`), and the
/// sums end up in `$sums`. Blocks alternate between two accumulator sets (a single chain
/// would wait out the FMA latency on every block), at every row count, so a row's sum is
/// the same bits alone (decode) as in a tile of four (prefill).
macro_rules! block_loop {
    (@one $w:expr, $wb:expr, $ab:expr, $blk:expr, $a:ident, $wp:ident, $acc:ident = $set:expr; $body:block) => {{
        let $acc = &mut $set;
        // SAFETY: block `$blk < nb` of the weight row.
        let $wp = unsafe { $w.add($blk * $wb) };
        // A hint that never dereferences; `wrapping_add` keeps the address arithmetic
        // defined past the row's end.
        _mm_prefetch::<_MM_HINT_T0>($wp.wrapping_add(PREFETCH_BYTES) as *const i8);
        $body
        for p in $a.iter_mut() {
            // SAFETY: stays within (or one past) each activation row of `nb` blocks.
            *p = unsafe { p.add($ab) };
        }
    }};
    ($nb:expr, $w:expr, $acts:expr, $wb:expr, $ab:expr, $sums:ident, |$wp:ident, $a:ident, $acc:ident| $body:block) => {{
        // SAFETY: the caller guarantees `R` activation rows.
        let mut $a: [*const u8; R] = unsafe { rows::<R>($acts) };
        let mut pair = [[_mm256_setzero_ps(); R]; 2];
        let mut blk = 0;
        // Pairs of blocks feed the two sets.
        while blk + 1 < $nb {
            block_loop!(@one $w, $wb, $ab, blk, $a, $wp, $acc = pair[0]; $body);
            block_loop!(@one $w, $wb, $ab, blk + 1, $a, $wp, $acc = pair[1]; $body);
            blk += 2;
        }
        while blk < $nb {
            block_loop!(@one $w, $wb, $ab, blk, $a, $wp, $acc = pair[0]; $body);
            blk += 1;
        }
        for r in 0..R {
            $sums[r] = _mm256_add_ps(pair[0][r], pair[1][r]);
        }
    }};
}

/// Defines the five dot products (`DOTS`, in table order) compiled with `$features`,
/// with `$sums(u, s)` the i32 sums of four consecutive u8 × i8 products per lane.
macro_rules! legacy_dots {
    ($features:literal, $sums:path) => {
        /// This instruction set's dot products for the 32-value formats.
        pub(in crate::quantized::x86) const DOTS: [(DType, DotFn); 5] = [
            (DType::Q4_0, rows_dispatch!(dot_q4_0)),
            (DType::Q4_1, rows_dispatch!(dot_q4_1)),
            (DType::Q5_0, rows_dispatch!(dot_q5_0)),
            (DType::Q5_1, rows_dispatch!(dot_q5_1)),
            (DType::Q8_0, rows_dispatch!(dot_q8_0)),
        ];

        /// Signed weights `qx` (−127..=127, scale the f16 at `wp`) against Q8_0 activation rows:
        /// the shared inner step.
        ///
        /// # Safety
        ///
        /// Each `a[r]` points to a readable Q8_0 block; AVX2, FMA, F16C present.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn signed_step<const R: usize>(
            qx: __m256i,
            wp: *const u8,
            a: &[*const u8; R],
            acc: &mut [__m256; R],
        ) {
            let ax = _mm256_sign_epi8(qx, qx);
            for r in 0..R {
                // SAFETY: a readable 34-byte Q8_0 block at `a[r]`, the weight scale at `wp`.
                let (d, qy) = unsafe {
                    (
                        fp16_product(wp, a[r]),
                        _mm256_loadu_si256(a[r].add(2) as *const __m256i),
                    )
                };
                let p = _mm256_cvtepi32_ps($sums(ax, _mm256_sign_epi8(qy, qx)));
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), p, acc[r]);
            }
        }

        /// Unsigned weights `qx` (scale the f16 at `wp`) with a min `m` against Q8_1 activation
        /// rows.
        ///
        /// # Safety
        ///
        /// Each `a[r]` points to a readable Q8_1 block; AVX2, FMA, F16C present.
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn unsigned_step<const R: usize>(
            qx: __m256i,
            wp: *const u8,
            m: f32,
            a: &[*const u8; R],
            acc: &mut [__m256; R],
            mins: &mut [f32; R],
        ) {
            for r in 0..R {
                // SAFETY: a readable 36-byte Q8_1 block at `a[r]`, the weight scale at `wp`.
                let (d, sa, qy) = unsafe {
                    (
                        fp16_product(wp, a[r]),
                        fp16(a[r].add(2)),
                        _mm256_loadu_si256(a[r].add(4) as *const __m256i),
                    )
                };
                acc[r] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps($sums(qx, qy)), acc[r]);
                mins[r] += m * sa;
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q4_0<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            block_loop!(nb, w, acts, 18, 34, acc, |wp, a, lane| {
                // SAFETY: an 18-byte Q4_0 block at `wp`; Q8_0 blocks at `a`.
                unsafe {
                    let qx = _mm256_sub_epi8(nibbles32(wp.add(2)), _mm256_set1_epi8(8));
                    signed_step(qx, wp, &a, lane);
                }
            });
            for r in 0..R {
                out[r] = hsum(acc[r]);
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q5_0<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            block_loop!(nb, w, acts, 22, 34, acc, |wp, a, lane| {
                // SAFETY: a 22-byte Q5_0 block at `wp`; Q8_0 blocks at `a`.
                unsafe {
                    // level = nibble | (bit << 4) − 16: OR 0xF0 (−16 as i8) where the bit is
                    // clear.
                    let hi = _mm256_andnot_si256(bits32(wp.add(2)), _mm256_set1_epi8(0xF0u8 as i8));
                    let qx = _mm256_or_si256(nibbles32(wp.add(6)), hi);
                    signed_step(qx, wp, &a, lane);
                }
            });
            for r in 0..R {
                out[r] = hsum(acc[r]);
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q8_0<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            block_loop!(nb, w, acts, 34, 34, acc, |wp, a, lane| {
                // SAFETY: a 34-byte Q8_0 block at `wp`; Q8_0 blocks at `a`.
                unsafe {
                    let qx = _mm256_loadu_si256(wp.add(2) as *const __m256i);
                    signed_step(qx, wp, &a, lane);
                }
            });
            for r in 0..R {
                out[r] = hsum(acc[r]);
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q4_1<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let mut mins = [0f32; R];
            block_loop!(nb, w, acts, 20, 36, acc, |wp, a, lane| {
                // SAFETY: a 20-byte Q4_1 block at `wp`; Q8_1 blocks at `a`.
                unsafe {
                    let qx = nibbles32(wp.add(4));
                    unsigned_step(qx, wp, fp16(wp.add(2)), &a, lane, &mut mins);
                }
            });
            for r in 0..R {
                out[r] = hsum(acc[r]) + mins[r];
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q5_1<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let mut mins = [0f32; R];
            block_loop!(nb, w, acts, 24, 36, acc, |wp, a, lane| {
                // SAFETY: a 24-byte Q5_1 block at `wp`; Q8_1 blocks at `a`.
                unsafe {
                    let hi = _mm256_and_si256(bits32(wp.add(4)), _mm256_set1_epi8(0x10));
                    let qx = _mm256_or_si256(nibbles32(wp.add(8)), hi);
                    unsigned_step(qx, wp, fp16(wp.add(2)), &a, lane, &mut mins);
                }
            });
            for r in 0..R {
                out[r] = hsum(acc[r]) + mins[r];
            }
        }
    };
}
/// The AVX2 kernels: `maddubs` + `madd`.
pub(super) mod maddubs {
    use super::*;

    legacy_dots!("avx2,fma,f16c", super::super::maddubs_sums);
}

/// The AVX-VNNI kernels: `vpdpbusd`.
pub(super) mod avx_vnni {
    use super::*;

    legacy_dots!("avx2,fma,f16c,avxvnni", super::super::vnni::sums_avx);
}

/// The AVX-512 VNNI (256-bit) kernels: `vpdpbusd`.
pub(super) mod avx512_vnni {
    use super::*;

    legacy_dots!(
        "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
        super::super::vnni::sums_avx512
    );
}
