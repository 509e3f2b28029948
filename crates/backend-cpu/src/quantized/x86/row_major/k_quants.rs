//! Row-major dot products of the K-quants against Q8_K activations: Q2_K, Q3_K, Q4_K,
//! Q5_K, Q6_K.
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
//! The sub-block scales multiply the `maddubs` pair sums in [`IntDots::dpwssd`]: `madd`
//! and an add on AVX2, one `vpdpwssd` with VNNI.

use std::arch::x86_64::*;

use super::super::vectors::{fp16, hsum, hsum128, prefetch_row, rows};
use super::super::{IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS, RowDot};

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

/// A K-quant: its block size and how one super-block meets the activation blocks.
pub(in crate::quantized::x86) trait KFormat {
    /// Bytes of a weight super-block.
    const BLOCK_BYTES: usize;
    /// Whether the format sums its mins apart in 128-bit accumulators (Q4_K, Q5_K).
    const MIN_SUMS: bool;

    /// Adds the super-block at `wp` times each activation block `a[r]` to `acc[r]`, and
    /// its min terms to `mins[r]`.
    ///
    /// # Safety
    ///
    /// A readable weight super-block at `wp` and a readable Q8_K block at each `a[r]`.
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
        mins: &mut [__m128; R],
    );
}

/// The row-major dot product of the K-quant `F`.
pub(in crate::quantized::x86) struct KQuant<F>(F);

impl<F: KFormat> RowDot for KQuant<F> {
    #[inline(always)]
    unsafe fn dot<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    ) {
        let s = isa.avx2();
        // SAFETY: the token proves AVX.
        let (mut acc, mut mins) = unsafe { ([_mm256_setzero_ps(); R], [_mm_setzero_ps(); R]) };
        // SAFETY: the caller guarantees `R` activation rows.
        let mut a: [*const u8; R] = unsafe { rows::<R>(acts) };
        for blk in 0..nb {
            // SAFETY: block `blk < nb` of the weight row.
            let wp = unsafe { w.add(blk * F::BLOCK_BYTES) };
            prefetch_row(s, wp, PREFETCH_BYTES, F::BLOCK_BYTES.div_ceil(64));
            // SAFETY: the super-block at `wp` and block `blk` of each activation row
            // (the `DotFn` contract: `nb` blocks each).
            unsafe { F::block(isa, wp, &a, &mut acc, &mut mins) };
            for p in a.iter_mut() {
                // SAFETY: within (or one past) each activation row of `nb` blocks.
                *p = unsafe { p.add(Q8K_BYTES) };
            }
        }
        for r in 0..R {
            out[r] = if F::MIN_SUMS {
                hsum(s, acc[r]) + hsum128(s, mins[r])
            } else {
                hsum(s, acc[r])
            };
        }
    }
}

/// `acc[r] += (d · d_a) · sumi[r]` for each activation row's Q8_K block at `a[r]` (its
/// scale `d_a` is the block's first f32).
///
/// # Safety
///
/// Each `a[r]` points to a readable Q8_K block.
#[inline(always)]
pub(in crate::quantized::x86) unsafe fn add_scaled<I: IntDots, const R: usize>(
    _: I,
    acc: &mut [__m256; R],
    d: f32,
    a: &[*const u8; R],
    sumi: &[__m256i; R],
) {
    for r in 0..R {
        // SAFETY: the block's first 4 bytes (the contract); the token proves AVX2, FMA.
        unsafe {
            let da = std::ptr::read_unaligned(a[r] as *const f32);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
}

/// `−2^SHIFT · Σ_i scale_i · bsum_i` in eight i32 lanes per activation row: where a
/// format stores `q + 2^SHIFT` (Q3_K: 4, Q6_K: 32), the integer sums start here and the
/// products then multiply the unsigned stored values. `scales16` holds the sixteen
/// 16-value sub-blocks' scales as i16 lanes.
///
/// # Safety
///
/// Each `a[r]` points to a readable Q8_K block.
#[inline(always)]
unsafe fn offset_sums<I: IntDots, const R: usize, const SHIFT: i32>(
    _: I,
    scales16: __m256i,
    a: &[*const u8; R],
) -> [__m256i; R] {
    // SAFETY: the token proves AVX.
    let mut sums = [unsafe { _mm256_setzero_si256() }; R];
    for (r, sum) in sums.iter_mut().enumerate() {
        // SAFETY: the block's 16 `bsums` (the contract); the token proves AVX2.
        unsafe {
            let bsums = _mm256_loadu_si256(a[r].add(Q8K_BSUMS) as *const __m256i);
            let weighted = _mm256_slli_epi32::<SHIFT>(_mm256_madd_epi16(scales16, bsums));
            *sum = _mm256_sub_epi32(_mm256_setzero_si256(), weighted);
        }
    }
    sums
}

/// A K-quant with sixteen 16-value sub-blocks and 2-bit low quants (Q2_K, Q3_K).
trait K16Quants {
    /// The 32 unsigned quants of values `128·half + 32·j ..` (two sub-blocks).
    ///
    /// # Safety
    ///
    /// A readable super-block at `wp`.
    unsafe fn quants<I: IntDots>(
        isa: I,
        wp: *const u8,
        hbits: __m256i,
        half: usize,
        j: usize,
    ) -> __m256i;
}

/// `sumi[r] += Σ_i scale_i · Σ_{l ∈ i} q_l · y_l` over a block of sixteen 16-value
/// sub-blocks, in eight i32 lanes, where `scales` holds the sixteen scales as i16 lanes.
/// Each quant vector and scale shuffle is made once for every activation row.
///
/// # Safety
///
/// A readable super-block at `wp` and a readable Q8_K block at each `a[r]`.
#[inline(always)]
unsafe fn k16_sums<I: IntDots, F: K16Quants, const R: usize>(
    isa: I,
    wp: *const u8,
    hbits: __m256i,
    scales: __m256i,
    a: &[*const u8; R],
    sumi: &mut [__m256i; R],
) {
    // SAFETY: the token proves AVX2; the weight block and the activation blocks are
    // readable (the contract).
    unsafe {
        // Sub-blocks 0..8 and 8..16, each in both 128-bit halves.
        let halves = [
            _mm256_permute2x128_si256::<0x00>(scales, scales),
            _mm256_permute2x128_si256::<0x11>(scales, scales),
        ];
        for (half, sc_half) in halves.iter().enumerate() {
            for j in 0..4 {
                let q = F::quants(isa, wp, hbits, half, j);
                let sc = _mm256_shuffle_epi8(
                    *sc_half,
                    _mm256_loadu_si256(SHUFFLE_PAIR16[j].as_ptr() as *const __m256i),
                );
                for r in 0..R {
                    let y = _mm256_loadu_si256(
                        a[r].add(Q8K_QS + 128 * half + 32 * j) as *const __m256i
                    );
                    sumi[r] = isa.dpwssd(sumi[r], sc, _mm256_maddubs_epi16(q, y));
                }
            }
        }
    }
}

/// Q2_K: 2-bit quants, 4-bit scales and mins.
pub(in crate::quantized::x86) struct Q2K;

impl K16Quants for Q2K {
    #[inline(always)]
    unsafe fn quants<I: IntDots>(
        _: I,
        wp: *const u8,
        _: __m256i,
        half: usize,
        j: usize,
    ) -> __m256i {
        // SAFETY: 32 bytes of the block's `qs`; the token proves AVX2.
        unsafe {
            let bits = _mm256_loadu_si256(wp.add(16 + 32 * half) as *const __m256i);
            let shifted = _mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * j as i32));
            _mm256_and_si256(shifted, _mm256_set1_epi8(3))
        }
    }
}

impl KFormat for Q2K {
    const BLOCK_BYTES: usize = 84;
    const MIN_SUMS: bool = false;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
        _: &mut [__m128; R],
    ) {
        // SAFETY: a readable 84-byte Q2_K block at `wp`, Q8_K blocks at `a`; the token
        // proves AVX2 and FMA.
        unsafe {
            let s = isa.avx2();
            let m4 = _mm_set1_epi8(0x0F);
            let d = fp16(s, wp.add(80));
            let dmin = fp16(s, wp.add(82));
            let packed = _mm_loadu_si128(wp as *const __m128i);
            let scales = _mm256_cvtepu8_epi16(_mm_and_si128(packed, m4));
            let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
            let mut sumi = [_mm256_setzero_si256(); R];
            k16_sums::<I, Self, R>(isa, wp, _mm256_setzero_si256(), scales, a, &mut sumi);
            add_scaled(isa, acc, d, a, &sumi);
            for r in 0..R {
                let da = std::ptr::read_unaligned(a[r] as *const f32);
                let bsums = _mm256_loadu_si256(a[r].add(Q8K_BSUMS) as *const __m256i);
                let summ = _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bsums));
                acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * da), summ, acc[r]);
            }
        }
    }
}

/// The sixteen 6-bit Q3_K scales (12 packed bytes at `p`) minus 32, as i8 (ggml's `aux`
/// unpacking: low nibbles from bytes 0..8, high bit pairs from bytes 8..12).
///
/// # Safety
///
/// `p` points to 12 readable bytes.
#[inline(always)]
unsafe fn scales_q3_k<I: IntDots>(_: I, p: *const u8) -> __m128i {
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
    // SAFETY: the token proves SSE2.
    unsafe {
        _mm_sub_epi8(
            _mm_set_epi32(s[3] as i32, s[2] as i32, s[1] as i32, s[0] as i32),
            _mm_set1_epi8(32),
        )
    }
}

/// Q3_K: 2-bit quants with a third bit, 6-bit scales.
pub(in crate::quantized::x86) struct Q3K;

impl K16Quants for Q3K {
    #[inline(always)]
    unsafe fn quants<I: IntDots>(
        _: I,
        wp: *const u8,
        hbits: __m256i,
        half: usize,
        j: usize,
    ) -> __m256i {
        // SAFETY: 32 bytes of the block's `qs`; the token proves AVX2.
        unsafe {
            let m3 = _mm256_set1_epi8(3);
            let bits = _mm256_loadu_si256(wp.add(32 + 32 * half) as *const __m256i);
            let low = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * j as i32)), m3);
            let high = _mm256_and_si256(
                _mm256_srl_epi16(hbits, _mm_cvtsi32_si128((4 * half + j) as i32)),
                _mm256_set1_epi8(1),
            );
            _mm256_or_si256(low, _mm256_slli_epi16(high, 2))
        }
    }
}

impl KFormat for Q3K {
    const BLOCK_BYTES: usize = 110;
    const MIN_SUMS: bool = false;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
        _: &mut [__m128; R],
    ) {
        // SAFETY: a readable 110-byte Q3_K block at `wp`, Q8_K blocks at `a`; the token
        // proves AVX2 and F16C.
        unsafe {
            let d = fp16(isa.avx2(), wp.add(108));
            let scales = _mm256_cvtepi8_epi16(scales_q3_k(isa, wp.add(96)));
            let hbits = _mm256_loadu_si256(wp as *const __m256i);
            // Stored as q + 4 (0..8, the high bit set for q >= 0).
            let mut sumi = offset_sums::<I, R, 2>(isa, scales, a);
            k16_sums::<I, Self, R>(isa, wp, hbits, scales, a, &mut sumi);
            add_scaled(isa, acc, d, a, &sumi);
        }
    }
}

/// The eight 6-bit scales and eight mins of a Q4_K/Q5_K block (12 packed bytes at `p`),
/// as 16 i16 lanes: scales in lanes 0..8, mins in 8..16 (ggml's `utmp` unpacking).
///
/// # Safety
///
/// `p` points to 12 readable bytes.
#[inline(always)]
unsafe fn scales_mins_k4<I: IntDots>(_: I, p: *const u8) -> __m256i {
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
    // SAFETY: the token proves AVX2.
    unsafe {
        _mm256_cvtepu8_epi16(_mm_set_epi32(
            u[3] as i32,
            u[2] as i32,
            u[1] as i32,
            u[0] as i32,
        ))
    }
}

/// A K-quant with eight 32-value sub-blocks, 6-bit scales and mins (Q4_K, Q5_K): its
/// super-block runs [`k4_block`].
trait K4Quants {
    /// Bytes of a weight super-block.
    const BLOCK_BYTES: usize;

    /// What the block's quants need beside the nibbles (Q5_K: its fifth bits).
    ///
    /// # Safety
    ///
    /// A readable super-block at `wp`.
    unsafe fn high_bits<I: IntDots>(isa: I, wp: *const u8) -> __m256i;
    /// The unsigned quants of sub-blocks `2j` and `2j + 1`.
    ///
    /// # Safety
    ///
    /// A readable super-block at `wp`.
    unsafe fn quants<I: IntDots>(
        isa: I,
        wp: *const u8,
        hbits: __m256i,
        j: usize,
    ) -> (__m256i, __m256i);
}

/// The Q4_K/Q5_K super-block body: mins against the activation's sums into `mins`, the
/// scaled sub-block sums into `acc`.
///
/// # Safety
///
/// A readable super-block at `wp` and a readable Q8_K block at each `a[r]`.
#[inline(always)]
unsafe fn k4_block<I: IntDots, F: K4Quants, const R: usize>(
    isa: I,
    wp: *const u8,
    a: &[*const u8; R],
    acc: &mut [__m256; R],
    accm: &mut [__m128; R],
) {
    // SAFETY: `wp` points to a readable weight block and each `a[r]` to a readable Q8_K
    // block (the contract); the token proves AVX2, FMA and F16C.
    unsafe {
        let s = isa.avx2();
        let hbits = F::high_bits(isa, wp);
        let d = fp16(s, wp);
        let dmin = fp16(s, wp.add(2));
        let sm = scales_mins_k4(isa, wp.add(4));
        let sc128 = _mm256_castsi256_si128(sm);
        let mins = _mm256_extracti128_si256(sm, 1);
        let scales = _mm256_set_m128i(sc128, sc128);
        let mut sumi = [_mm256_setzero_si256(); R];
        for r in 0..R {
            let bs = a[r].add(Q8K_BSUMS);
            let lo = _mm_loadu_si128(bs as *const __m128i);
            let hi = _mm_loadu_si128(bs.add(16) as *const __m128i);
            let prod = _mm_madd_epi16(mins, _mm_hadd_epi16(lo, hi));
            let da = std::ptr::read_unaligned(a[r] as *const f32);
            accm[r] = _mm_fmadd_ps(_mm_set1_ps(-da * dmin), _mm_cvtepi32_ps(prod), accm[r]);
        }
        for j in 0..4 {
            let scale_l = _mm256_shuffle_epi8(
                scales,
                _mm256_loadu_si256(SHUFFLE_K4[2 * j].as_ptr() as *const __m256i),
            );
            let scale_h = _mm256_shuffle_epi8(
                scales,
                _mm256_loadu_si256(SHUFFLE_K4[2 * j + 1].as_ptr() as *const __m256i),
            );
            let (ql, qh) = F::quants(isa, wp, hbits, j);
            for r in 0..R {
                let q8 = a[r].add(Q8K_QS + 64 * j);
                let q8l = _mm256_loadu_si256(q8 as *const __m256i);
                let q8h = _mm256_loadu_si256(q8.add(32) as *const __m256i);
                let sum = isa.dpwssd(sumi[r], scale_l, _mm256_maddubs_epi16(ql, q8l));
                sumi[r] = isa.dpwssd(sum, scale_h, _mm256_maddubs_epi16(qh, q8h));
            }
        }
        add_scaled(isa, acc, d, a, &sumi);
    }
}

impl<F: K4Quants> KFormat for F {
    const BLOCK_BYTES: usize = <F as K4Quants>::BLOCK_BYTES;
    const MIN_SUMS: bool = true;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
        mins: &mut [__m128; R],
    ) {
        // SAFETY: the caller's contract.
        unsafe { k4_block::<I, F, R>(isa, wp, a, acc, mins) }
    }
}

/// Q4_K: 4-bit quants.
pub(in crate::quantized::x86) struct Q4K;

impl K4Quants for Q4K {
    const BLOCK_BYTES: usize = 144;

    #[inline(always)]
    unsafe fn high_bits<I: IntDots>(_: I, _: *const u8) -> __m256i {
        // SAFETY: the token proves AVX.
        unsafe { _mm256_setzero_si256() }
    }
    #[inline(always)]
    unsafe fn quants<I: IntDots>(_: I, wp: *const u8, _: __m256i, j: usize) -> (__m256i, __m256i) {
        // SAFETY: 32 bytes of the block's `qs`; the token proves AVX2.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let bits = _mm256_loadu_si256(wp.add(16 + 32 * j) as *const __m256i);
            (
                _mm256_and_si256(bits, m4),
                _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
            )
        }
    }
}

/// Q5_K: 4-bit quants with a fifth bit.
pub(in crate::quantized::x86) struct Q5K;

impl K4Quants for Q5K {
    const BLOCK_BYTES: usize = 176;

    #[inline(always)]
    unsafe fn high_bits<I: IntDots>(_: I, wp: *const u8) -> __m256i {
        // SAFETY: `qh` is bytes 16..48 of the block; the token proves AVX.
        unsafe { _mm256_loadu_si256(wp.add(16) as *const __m256i) }
    }
    #[inline(always)]
    unsafe fn quants<I: IntDots>(
        _: I,
        wp: *const u8,
        hbits: __m256i,
        j: usize,
    ) -> (__m256i, __m256i) {
        // SAFETY: 32 bytes of the block's `qs`; the token proves AVX2.
        unsafe {
            let (m4, m1) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(1));
            let bits = _mm256_loadu_si256(wp.add(48 + 32 * j) as *const __m256i);
            let shift_l = _mm_cvtsi32_si128(2 * j as i32);
            let shift_h = _mm_cvtsi32_si128(2 * j as i32 + 1);
            let hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, shift_l), m1), 4);
            let hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, shift_h), m1), 4);
            (
                _mm256_add_epi8(_mm256_and_si256(bits, m4), hl),
                _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh),
            )
        }
    }
}

/// Q6_K: 6-bit quants stored as `q + 32`, i8 scales per 16 values.
pub(in crate::quantized::x86) struct Q6K;

impl KFormat for Q6K {
    const BLOCK_BYTES: usize = 210;
    const MIN_SUMS: bool = false;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
        _: &mut [__m128; R],
    ) {
        // SAFETY: a readable 210-byte Q6_K block at `wp`, Q8_K blocks at `a`; the token
        // proves AVX2, FMA and F16C.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let m2 = _mm256_set1_epi8(3);
            let d = fp16(isa.avx2(), wp.add(208));
            let scales = _mm_loadu_si128(wp.add(192) as *const __m128i);
            // The quants are stored as q + 32 (0..64): Σ s·(q + 32)·y − 32·Σ s·bsum, the
            // correction from the activation's 16-value sums (one `madd` per block
            // instead of a second `maddubs` per 32 values).
            let mut sumi = offset_sums::<I, R, 5>(isa, _mm256_cvtepi8_epi16(scales), a);
            for half in 0..2 {
                let ql = wp.add(64 * half);
                let qh = wp.add(128 + 32 * half);
                let mut sc = [_mm256_setzero_si256(); 4];
                for (i, sc) in sc.iter_mut().enumerate() {
                    let shuffle = SHUFFLE_6K[4 * half + i].as_ptr() as *const __m128i;
                    *sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, _mm_loadu_si128(shuffle)));
                }
                let [s0, s1, s2, s3] = sc;
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
                    let mut sum = sumi[r];
                    let parts = [(q0, s0), (q1, s1), (q2, s2), (q3, s3)];
                    for (i, (q, sc)) in parts.into_iter().enumerate() {
                        let y = _mm256_loadu_si256(q8.add(i));
                        sum = isa.dpwssd(sum, sc, _mm256_maddubs_epi16(q, y));
                    }
                    sumi[r] = sum;
                }
            }
            add_scaled(isa, acc, d, a, &sumi);
        }
    }
}
