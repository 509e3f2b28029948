//! AVX2 dot products for the K-quants against Q8_K activations: Q2_K, Q3_K, Q4_K, Q5_K,
//! Q6_K.
//!
//! Block layouts (bytes): Q8_K `d:f32 qs[256] bsums:i16[16]` (292); Q2_K `scales[16]
//! qs[64] d dmin` (84); Q3_K `hmask[32] qs[64] scales[12] d` (110); Q4_K `d dmin
//! scales[12] qs[128]` (144); Q5_K `d dmin scales[12] qh[32] qs[128]` (176); Q6_K
//! `ql[128] qh[64] scales:i8[16] d` (210).
//!
//! Where a format's quants are offset (Q3_K's `-4`, Q6_K's `-32`), the kernels multiply
//! the unsigned stored quants in `maddubs` and subtract the offset times the activation's
//! 16-value sums (`bsums`) once per block.
//!
//! The kernels are written once over the scaling step (`k_quant_dots!`: the sub-block
//! scales times the `maddubs` pair sums, added into i32 lanes) and compiled per
//! instruction set: [`maddubs`] (`madd` + add) and, with VNNI, `vpdpwssd` (one
//! instruction; at the AVX-512 level also 32 vector registers for the four-row tiles).

use std::arch::x86_64::*;

use tempra_tensor::DType;

use super::{Q8K_BSUMS, Q8K_BYTES, Q8K_QS, fp16, hsum, hsum128, rows, rows_dispatch};
use crate::quantized::kernels::DotFn;

/// How far ahead of the current super-block the weight row is prefetched: the one-row
/// kernels compute long enough per block that the hardware prefetcher alone leaves the
/// stream waiting (Q4_K and Q6_K read from memory clearly faster with the hints; 1 KiB and
/// 8 KiB ahead read slower than 4 KiB).
const PREFETCH_BYTES: usize = 4096;

/// `SHUFFLE_K4[i]`: a byte shuffle that broadcasts 16-bit lane `i` (of 8) to all lanes
/// of each 128-bit half.
const SHUFFLE_K4: [[u8; 32]; 8] = {
    let mut t = [[0u8; 32]; 8];
    let mut i = 0;
    while i < 8 {
        let mut b = 0;
        while b < 16 {
            t[i][2 * b] = 2 * i as u8;
            t[i][2 * b + 1] = 2 * i as u8 + 1;
            b += 1;
        }
        i += 1;
    }
    t
};

/// `SHUFFLE_6K[i]`: 8 copies of byte `2i` then 8 copies of byte `2i + 1`.
const SHUFFLE_6K: [[u8; 16]; 8] = {
    let mut t = [[0u8; 16]; 8];
    let mut i = 0;
    while i < 8 {
        let mut b = 0;
        while b < 8 {
            t[i][b] = 2 * i as u8;
            t[i][b + 8] = 2 * i as u8 + 1;
            b += 1;
        }
        i += 1;
    }
    t
};

/// `SHUFFLE_PAIR16[j]`: a byte shuffle of eight i16 lanes (the same eight in both
/// 128-bit halves) that broadcasts lane `2j` over the low half and lane `2j + 1` over the
/// high half: the scales of the two 16-value sub-blocks one 32-byte quant vector holds.
const SHUFFLE_PAIR16: [[u8; 32]; 4] = {
    let mut t = [[0u8; 32]; 4];
    let mut j = 0;
    while j < 4 {
        let mut b = 0;
        while b < 8 {
            t[j][2 * b] = 4 * j as u8;
            t[j][2 * b + 1] = 4 * j as u8 + 1;
            t[j][16 + 2 * b] = 4 * j as u8 + 2;
            t[j][16 + 2 * b + 1] = 4 * j as u8 + 3;
            b += 1;
        }
        j += 1;
    }
    t
};

/// The scale-weighted integer sums of a block with sixteen 16-value sub-blocks (Q2_K,
/// Q3_K): `$sumi[r] += Σ_i scale_i · Σ_{l ∈ i} q_l · y_l` in eight i32 lanes, where
/// `$scales` holds the sixteen scales as i16 lanes and `$unpack` (for `$half` in 0..2 and
/// `$j` in 0..4) gives the 32 unsigned quants of values `128·half + 32·j ..` (two
/// sub-blocks). Each quant vector and scale shuffle is made once for every activation row.
/// `$madd_add(acc, s, p)` adds the i16 pairs of `s · p` into `acc`'s i32 lanes.
macro_rules! k16_sums {
    (
        $madd_add:path, $scales:expr, $a:ident, $sumi:ident, |$half:ident, $j:ident| $unpack:block
    ) => {{
        // Expands inside the callers' `unsafe` blocks: each `$a[r]` points to a readable
        // Q8_K block (their contracts); AVX2 is enabled on them.
        {
            // Sub-blocks 0..8 and 8..16, each in both 128-bit halves.
            let halves = [
                _mm256_permute2x128_si256::<0x00>($scales, $scales),
                _mm256_permute2x128_si256::<0x11>($scales, $scales),
            ];
            for ($half, sc_half) in halves.iter().enumerate() {
                for $j in 0..4 {
                    let q = $unpack;
                    let sc = _mm256_shuffle_epi8(
                        *sc_half,
                        _mm256_loadu_si256(SHUFFLE_PAIR16[$j].as_ptr() as *const __m256i),
                    );
                    for r in 0..R {
                        let y = _mm256_loadu_si256(
                            $a[r].add(Q8K_QS + 128 * $half + 32 * $j) as *const __m256i
                        );
                        $sumi[r] = $madd_add($sumi[r], sc, _mm256_maddubs_epi16(q, y));
                    }
                }
            }
        }
    }};
}

/// The sixteen 6-bit Q3_K scales (12 packed bytes at `p`) minus 32, as i8 (ggml's `aux`
/// unpacking: low nibbles from bytes 0..8, high bit pairs from bytes 8..12).
///
/// # Safety
///
/// `p` points to 12 readable bytes; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales_q3_k(p: *const u8) -> __m128i {
    const KMASK1: u32 = 0x03030303;
    const KMASK2: u32 = 0x0f0f0f0f;
    // SAFETY: 12 readable bytes.
    let (a0, a1, t) = unsafe {
        (
            std::ptr::read_unaligned(p as *const u32),
            std::ptr::read_unaligned(p.add(4) as *const u32),
            std::ptr::read_unaligned(p.add(8) as *const u32),
        )
    };
    let s = [
        (a0 & KMASK2) | ((t & KMASK1) << 4),
        (a1 & KMASK2) | (((t >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((t >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((t >> 6) & KMASK1) << 4),
    ];
    _mm_sub_epi8(
        _mm_set_epi32(s[3] as i32, s[2] as i32, s[1] as i32, s[0] as i32),
        _mm_set1_epi8(32),
    )
}

/// `acc[r] += (d · d_a) · sumi[r]` for each activation row's Q8_K block at `a[r]` (its
/// scale `d_a` is the block's first f32).
///
/// # Safety
///
/// Each `a[r]` points to a readable Q8_K block; AVX2 and FMA present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn add_scaled<const R: usize>(
    acc: &mut [__m256; R],
    d: f32,
    a: &[*const u8; R],
    sumi: &[__m256i; R],
) {
    for r in 0..R {
        // SAFETY: the block's first 4 bytes (the contract).
        let da = unsafe { std::ptr::read_unaligned(a[r] as *const f32) };
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
    }
}

/// `−2^SHIFT · Σ_i scale_i · bsum_i` in eight i32 lanes per activation row: where a
/// format stores `q + 2^SHIFT` (Q3_K: 4, Q6_K: 32), the integer sums start here and the
/// products then multiply the unsigned stored values. `scales16` holds the sixteen
/// 16-value sub-blocks' scales as i16 lanes.
///
/// # Safety
///
/// Each `a[r]` points to a readable Q8_K block; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn offset_sums<const R: usize, const SHIFT: i32>(
    scales16: __m256i,
    a: &[*const u8; R],
) -> [__m256i; R] {
    std::array::from_fn(|r| {
        // SAFETY: the block's 16 `bsums` (the contract).
        let bsums = unsafe { _mm256_loadu_si256(a[r].add(Q8K_BSUMS) as *const __m256i) };
        let weighted = _mm256_slli_epi32::<SHIFT>(_mm256_madd_epi16(scales16, bsums));
        _mm256_sub_epi32(_mm256_setzero_si256(), weighted)
    })
}

/// The eight 6-bit scales and eight mins of a Q4_K/Q5_K block (12 packed bytes at `p`),
/// as 16 i16 lanes: scales in lanes 0..8, mins in 8..16 (ggml's `utmp` unpacking).
///
/// # Safety
///
/// `p` points to 12 readable bytes; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales_mins_k4(p: *const u8) -> __m256i {
    const KMASK1: u32 = 0x3f3f3f3f;
    const KMASK2: u32 = 0x0f0f0f0f;
    const KMASK3: u32 = 0x03030303;
    // SAFETY: 12 readable bytes.
    let mut u: [u32; 4] = unsafe {
        [
            std::ptr::read_unaligned(p as *const u32),
            std::ptr::read_unaligned(p.add(4) as *const u32),
            std::ptr::read_unaligned(p.add(8) as *const u32),
            0,
        ]
    };
    u[3] = ((u[2] >> 4) & KMASK2) | (((u[1] >> 6) & KMASK3) << 4);
    let uaux = u[1] & KMASK1;
    u[1] = (u[2] & KMASK2) | (((u[0] >> 6) & KMASK3) << 4);
    u[2] = uaux;
    u[0] &= KMASK1;
    _mm256_cvtepu8_epi16(_mm_set_epi32(
        u[3] as i32,
        u[2] as i32,
        u[1] as i32,
        u[0] as i32,
    ))
}

/// The shared Q4_K/Q5_K block body: `$unpack` (for `$j` in 0..4) gives the unsigned quants of the
/// 32-value sub-blocks `2j` and `2j + 1` (j in 0..4); `$madd_add` as in `k16_sums!`.
macro_rules! k4_block {
    ($madd_add:path, $wp:ident, $a:ident, $acc:ident, $accm:ident, |$j:ident| $unpack:block) => {{
        // SAFETY: `$wp` points to a readable weight block and each `$a[r]` to a readable
        // Q8_K block (the callers' contracts); AVX2/FMA/F16C are enabled on the callers.
        unsafe {
            let d = fp16($wp);
            let dmin = fp16($wp.add(2));
            let sm = scales_mins_k4($wp.add(4));
            let sc128 = _mm256_castsi256_si128(sm);
            let mins = _mm256_extracti128_si256(sm, 1);
            let scales = _mm256_set_m128i(sc128, sc128);
            let mut sumi = [_mm256_setzero_si256(); R];
            for r in 0..R {
                let bs = $a[r].add(Q8K_BSUMS);
                let lo = _mm_loadu_si128(bs as *const __m128i);
                let hi = _mm_loadu_si128(bs.add(16) as *const __m128i);
                let prod = _mm_madd_epi16(mins, _mm_hadd_epi16(lo, hi));
                let da = std::ptr::read_unaligned($a[r] as *const f32);
                $accm[r] = _mm_fmadd_ps(_mm_set1_ps(-da * dmin), _mm_cvtepi32_ps(prod), $accm[r]);
            }
            for $j in 0..4 {
                let scale_l = _mm256_shuffle_epi8(
                    scales,
                    _mm256_loadu_si256(SHUFFLE_K4[2 * $j].as_ptr() as *const __m256i),
                );
                let scale_h = _mm256_shuffle_epi8(
                    scales,
                    _mm256_loadu_si256(SHUFFLE_K4[2 * $j + 1].as_ptr() as *const __m256i),
                );
                let (ql, qh) = $unpack;
                for r in 0..R {
                    let q8 = $a[r].add(Q8K_QS + 64 * $j);
                    let q8l = _mm256_loadu_si256(q8 as *const __m256i);
                    let q8h = _mm256_loadu_si256(q8.add(32) as *const __m256i);
                    let s = $madd_add(sumi[r], scale_l, _mm256_maddubs_epi16(ql, q8l));
                    sumi[r] = $madd_add(s, scale_h, _mm256_maddubs_epi16(qh, q8h));
                }
            }
            add_scaled(&mut $acc, d, &$a, &sumi);
        }
    }};
}

/// Walks the `nb` super-blocks of a K-quant row of `$wb`-byte blocks.
macro_rules! super_block_loop {
    ($nb:expr, $w:expr, $acts:expr, $wb:expr, |$wp:ident, $a:ident| $body:block) => {{
        // SAFETY: the caller guarantees `R` activation rows.
        let mut $a: [*const u8; R] = unsafe { rows::<R>($acts) };
        for blk in 0..$nb {
            // SAFETY: block `blk < nb` of the weight row.
            let $wp = unsafe { $w.add(blk * $wb) };
            for line in 0..($wb as usize).div_ceil(64) {
                // A hint that never dereferences; `wrapping_add` keeps the address
                // arithmetic defined past the row's end.
                let ahead = $wp.wrapping_add(PREFETCH_BYTES + 64 * line);
                _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
            }
            $body
            for p in $a.iter_mut() {
                // SAFETY: within (or one past) each activation row of `nb` blocks.
                *p = unsafe { p.add(Q8K_BYTES) };
            }
        }
    }};
}

/// Defines the five dot products (`DOTS`, in table order) compiled with `$features`,
/// with `$madd_add(acc, s, p)` adding the i16 pairs of `s · p` into `acc`'s i32 lanes
/// (the sub-block scales times the `maddubs` sums).
macro_rules! k_quant_dots {
    ($features:literal, $madd_add:path) => {
        /// This instruction set's dot products for the K-quants.
        pub(in crate::quantized::x86) const DOTS: [(DType, DotFn); 5] = [
            (DType::Q2K, rows_dispatch!(dot_q2_k)),
            (DType::Q3K, rows_dispatch!(dot_q3_k)),
            (DType::Q4K, rows_dispatch!(dot_q4_k)),
            (DType::Q5K, rows_dispatch!(dot_q5_k)),
            (DType::Q6K, rows_dispatch!(dot_q6_k)),
        ];

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q2_k<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let m3 = _mm256_set1_epi8(3);
            let m4 = _mm_set1_epi8(0x0F);
            super_block_loop!(nb, w, acts, 84, |wp, a| {
                // SAFETY: a readable 84-byte Q2_K block at `wp`; Q8_K blocks at `a`.
                unsafe {
                    let d = fp16(wp.add(80));
                    let dmin = fp16(wp.add(82));
                    let packed = _mm_loadu_si128(wp as *const __m128i);
                    let scales = _mm256_cvtepu8_epi16(_mm_and_si128(packed, m4));
                    let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
                    let mut sumi = [_mm256_setzero_si256(); R];
                    k16_sums!($madd_add, scales, a, sumi, |half, j| {
                        let bits = _mm256_loadu_si256(wp.add(16 + 32 * half) as *const __m256i);
                        _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * j as i32)), m3)
                    });
                    add_scaled(&mut acc, d, &a, &sumi);
                    for r in 0..R {
                        let da = std::ptr::read_unaligned(a[r] as *const f32);
                        let bsums = _mm256_loadu_si256(a[r].add(Q8K_BSUMS) as *const __m256i);
                        let summ = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bsums));
                        acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * da), summ, acc[r]);
                    }
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
        unsafe fn dot_q3_k<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let m3 = _mm256_set1_epi8(3);
            let m1 = _mm256_set1_epi8(1);
            super_block_loop!(nb, w, acts, 110, |wp, a| {
                // SAFETY: a readable 110-byte Q3_K block at `wp`; Q8_K blocks at `a`.
                unsafe {
                    let d = fp16(wp.add(108));
                    let scales = _mm256_cvtepi8_epi16(scales_q3_k(wp.add(96)));
                    let hbits = _mm256_loadu_si256(wp as *const __m256i);
                    // Stored as q + 4 (0..8, the high bit set for q >= 0).
                    let mut sumi = offset_sums::<R, 2>(scales, &a);
                    k16_sums!($madd_add, scales, a, sumi, |half, j| {
                        let bits = _mm256_loadu_si256(wp.add(32 + 32 * half) as *const __m256i);
                        let low =
                            _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * j as i32)), m3);
                        let high = _mm256_and_si256(
                            _mm256_srl_epi16(hbits, _mm_cvtsi32_si128((4 * half + j) as i32)),
                            m1,
                        );
                        _mm256_or_si256(low, _mm256_slli_epi16(high, 2))
                    });
                    add_scaled(&mut acc, d, &a, &sumi);
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
        unsafe fn dot_q4_k<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let mut accm = [_mm_setzero_ps(); R];
            let m4 = _mm256_set1_epi8(0x0F);
            super_block_loop!(nb, w, acts, 144, |wp, a| {
                k4_block!($madd_add, wp, a, acc, accm, |j| {
                    let bits = _mm256_loadu_si256(wp.add(16 + 32 * j) as *const __m256i);
                    (
                        _mm256_and_si256(bits, m4),
                        _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                    )
                });
            });
            for r in 0..R {
                out[r] = hsum(acc[r]) + hsum128(accm[r]);
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q5_k<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let mut accm = [_mm_setzero_ps(); R];
            let m4 = _mm256_set1_epi8(0x0F);
            let m1 = _mm256_set1_epi8(1);
            super_block_loop!(nb, w, acts, 176, |wp, a| {
                // SAFETY: a readable 176-byte Q5_K block at `wp`: `qh` is bytes 16..48.
                let hbits = unsafe { _mm256_loadu_si256(wp.add(16) as *const __m256i) };
                k4_block!($madd_add, wp, a, acc, accm, |j| {
                    let bits = _mm256_loadu_si256(wp.add(48 + 32 * j) as *const __m256i);
                    let shift_l = _mm_cvtsi32_si128(2 * j as i32);
                    let shift_h = _mm_cvtsi32_si128(2 * j as i32 + 1);
                    let hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, shift_l), m1), 4);
                    let hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, shift_h), m1), 4);
                    (
                        _mm256_add_epi8(_mm256_and_si256(bits, m4), hl),
                        _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh),
                    )
                });
            });
            for r in 0..R {
                out[r] = hsum(acc[r]) + hsum128(accm[r]);
            }
        }

        /// # Safety
        ///
        /// See [`DotFn`]; `acts.len() >= R`, `out.len() >= R`.
        #[target_feature(enable = $features)]
        unsafe fn dot_q6_k<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[*const u8],
            out: &mut [f32],
        ) {
            let mut acc = [_mm256_setzero_ps(); R];
            let m4 = _mm256_set1_epi8(0x0F);
            let m2 = _mm256_set1_epi8(3);
            super_block_loop!(nb, w, acts, 210, |wp, a| {
                // SAFETY: a readable 210-byte Q6_K block at `wp`; Q8_K blocks at `a`.
                unsafe {
                    let d = fp16(wp.add(208));
                    let scales = _mm_loadu_si128(wp.add(192) as *const __m128i);
                    // The quants are stored as q + 32 (0..64): Σ s·(q + 32)·y − 32·Σ s·bsum, the
                    // correction from the activation's 16-value sums (one `madd` per block
                    // instead of a second `maddubs` per 32 values).
                    let mut sumi = offset_sums::<R, 5>(_mm256_cvtepi8_epi16(scales), &a);
                    for half in 0..2 {
                        let ql = wp.add(64 * half);
                        let qh = wp.add(128 + 32 * half);
                        let sc = |i: usize| {
                            let s = _mm_shuffle_epi8(
                                scales,
                                _mm_loadu_si128(SHUFFLE_6K[4 * half + i].as_ptr() as *const __m128i),
                            );
                            _mm256_cvtepi8_epi16(s)
                        };
                        let (s0, s1, s2, s3) = (sc(0), sc(1), sc(2), sc(3));
                        let b1 = _mm256_loadu_si256(ql as *const __m256i);
                        let b2 = _mm256_loadu_si256(ql.add(32) as *const __m256i);
                        let bh = _mm256_loadu_si256(qh as *const __m256i);
                        let h0 = _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4);
                        let h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4);
                        let h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4);
                        let h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4);
                        let q0 = _mm256_or_si256(_mm256_and_si256(b1, m4), h0);
                        let q1 = _mm256_or_si256(_mm256_and_si256(b2, m4), h1);
                        let q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), h2);
                        let q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), h3);
                        for r in 0..R {
                            let q8 = a[r].add(Q8K_QS + 128 * half) as *const __m256i;
                            let mut s = sumi[r];
                            let parts = [(q0, s0), (q1, s1), (q2, s2), (q3, s3)];
                            for (i, (q, sc)) in parts.into_iter().enumerate() {
                                let y = _mm256_loadu_si256(q8.add(i));
                                s = $madd_add(s, sc, _mm256_maddubs_epi16(q, y));
                            }
                            sumi[r] = s;
                        }
                    }
                    add_scaled(&mut acc, d, &a, &sumi);
                }
            });
            for r in 0..R {
                out[r] = hsum(acc[r]);
            }
        }
    };
}
/// The AVX2 kernels: `madd` and an add.
pub(super) mod maddubs {
    use super::*;

    k_quant_dots!("avx2,fma,f16c", super::super::madd_add);
}

/// The AVX-VNNI kernels: `maddubs`, then `vpdpwssd` for the scaling and the add.
pub(super) mod avx_vnni {
    use super::*;

    k_quant_dots!("avx2,fma,f16c,avxvnni", super::super::vnni::dpwssd_avx);
}

/// The AVX-512 VNNI (256-bit) kernels: `maddubs`, then `vpdpwssd` for the scaling and the add.
pub(super) mod avx512_vnni {
    use super::*;

    k_quant_dots!(
        "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
        super::super::vnni::dpwssd_avx512
    );
}
