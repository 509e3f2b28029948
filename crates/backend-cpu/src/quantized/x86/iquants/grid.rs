//! The formats read as eight 32-value sub-blocks against Q8_K ([`SubBlocks`]: IQ4_XS,
//! IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_S, IQ1_M) and the one kernel over them
//! ([`SubBlockKernel`]), with the IQ2/IQ3 unpackers.
//!
//! A sub-block unpacks to 32 magnitudes `u` (u8), a sign source `s` (i8; the sign of each
//! byte goes onto the activation, as ggml's `sign`) and sixteen i16 scales (one per pair
//! of values, so a scale per 16 or per 32 values); per activation row the kernel adds
//! `madd(maddubs(u, sign(y, s)), scales)` into eight i32 lanes and scales the block's sum
//! once by `d_w · 2^-k · d_a` in f32. The IQ2/IQ3 grids are gathered from
//! `tempra_tensor`'s tables (ggml's), one 64-bit (IQ2) or 32-bit (IQ3) entry per group.

use std::arch::x86_64::*;
use std::marker::PhantomData;

use tempra_tensor::quant::iq_grids::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS,
};

use super::super::Q8K_QS;
use super::super::row_major::k_quants::add_scaled;
use super::super::vectors::{bits32, fp16};
use super::{BlockKernel, IntDots};
use crate::x86::Avx2;

/// One unpacked 32-value sub-block.
#[derive(Clone, Copy)]
pub(in crate::quantized::x86) struct SubBlock {
    /// The 32 magnitudes (u8).
    pub(super) u: __m256i,
    /// The sign source (i8): negative where the value is negative, never zero.
    pub(super) s: __m256i,
    /// The scale of each pair of values (sixteen i16 lanes).
    pub(super) scales: __m256i,
}

/// A format read as eight 32-value sub-blocks (see the module docs).
pub(in crate::quantized::x86) trait SubBlocks {
    /// Bytes per super-block.
    const BLOCK_BYTES: usize;
    /// The power of two the integer sums are scaled by besides `d_w · d_a`.
    const FACTOR: f32;

    /// The super-block scale `d_w`: by default the block's leading f16.
    ///
    /// # Safety
    ///
    /// `wp` points to a readable block; AVX2, FMA and F16C present.
    #[inline(always)]
    unsafe fn d(s: Avx2, wp: *const u8) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { fp16(s, wp) }
    }

    /// Sub-block `ib` (0..8).
    ///
    /// # Safety
    ///
    /// `wp` points to a readable block; AVX2, FMA and F16C present.
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock;

    /// Sub-blocks `2p` and `2p + 1` (`p` in 0..4): by default one [`SubBlocks::sub`]
    /// each.
    ///
    /// # Safety
    ///
    /// `wp` points to a readable block; AVX2, FMA and F16C present.
    #[inline(always)]
    unsafe fn pair(s: Avx2, wp: *const u8, p: usize) -> [SubBlock; 2] {
        // SAFETY: the caller's contract.
        unsafe { [Self::sub(s, wp, 2 * p), Self::sub(s, wp, 2 * p + 1)] }
    }
}

/// [`BlockKernel`] for a [`SubBlocks`] format.
pub(in crate::quantized::x86) struct SubBlockKernel<S>(PhantomData<S>);

impl<S: SubBlocks> BlockKernel for SubBlockKernel<S> {
    const BLOCK_BYTES: usize = S::BLOCK_BYTES;

    #[inline(always)]
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
    ) {
        let s = isa.avx2();
        // SAFETY: the token proves AVX2, FMA and F16C; `wp` holds a whole block and each
        // `a[r]` a whole Q8_K block (the caller's contract).
        unsafe {
            let mut sumi = [_mm256_setzero_si256(); R];
            for p in 0..4 {
                let subs = S::pair(s, wp, p);
                for (h, sub) in subs.iter().enumerate() {
                    for r in 0..R {
                        let y = a[r].add(Q8K_QS + 64 * p + 32 * h);
                        let y = _mm256_loadu_si256(y as *const __m256i);
                        let pairs = _mm256_maddubs_epi16(sub.u, _mm256_sign_epi8(y, sub.s));
                        sumi[r] = isa.dpwssd(sumi[r], pairs, sub.scales);
                    }
                }
            }
            add_scaled(isa, acc, S::d(s, wp) * S::FACTOR, a, &sumi);
        }
    }
}

/// `KEVEN_SIGNS[i]`: the sign pattern `KSIGNS_IQ2XS[i]` as eight bytes, 0xFF (−1) where
/// the bit is set and 0x01 (+1) where it is not (ggml's `keven_signs_q2xs`).
static KEVEN_SIGNS: [u64; 128] = {
    let mut t = [0u64; 128];
    let mut i = 0;
    while i < 128 {
        let mut j = 0;
        while j < 8 {
            let byte: u64 = if KSIGNS_IQ2XS[i] & (1 << j) != 0 {
                0xFF
            } else {
                0x01
            };
            t[i] |= byte << (8 * j);
            j += 1;
        }
        i += 1;
    }
    t
};

/// Eight sign bytes per 7-bit pattern, for four groups (bits `7l..7l+7` of `aux`).
#[inline(always)]
fn patterned_signs(_: Avx2, aux: u32) -> __m256i {
    let s0 = KEVEN_SIGNS[(aux & 127) as usize] as i64;
    let s1 = KEVEN_SIGNS[((aux >> 7) & 127) as usize] as i64;
    let s2 = KEVEN_SIGNS[((aux >> 14) & 127) as usize] as i64;
    let s3 = KEVEN_SIGNS[((aux >> 21) & 127) as usize] as i64;
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_set_epi64x(s3, s2, s1, s0) }
}

/// Thirty-two explicit sign bits at `p` as sign bytes (±1).
///
/// # Safety
///
/// `p` points to 4 readable bytes; AVX2 present.
#[inline(always)]
unsafe fn explicit_signs(s: Avx2, p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe { _mm256_or_si256(bits32(s, p), _mm256_set1_epi8(1)) }
}

/// One i16 scale for a whole sub-block.
#[inline(always)]
pub(super) fn scales32(_: Avx2, scale: i32) -> __m256i {
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_set1_epi16(scale as i16) }
}

/// An i16 scale for the first 16 values of a sub-block and another for the last 16.
#[inline(always)]
pub(super) fn scales16(_: Avx2, first: i32, second: i32) -> __m256i {
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_set_m128i(_mm_set1_epi16(second as i16), _mm_set1_epi16(first as i16)) }
}

/// Four 64-bit grid entries (the values of 32 weights), entry `i[k]` in lanes `8k..8k+8`.
#[inline(always)]
pub(super) fn grid8(_: Avx2, grid: &[u64], i: [usize; 4]) -> __m256i {
    let (e0, e1, e2, e3) = (grid[i[0]], grid[i[1]], grid[i[2]], grid[i[3]]);
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_set_epi64x(e3 as i64, e2 as i64, e1 as i64, e0 as i64) }
}

/// Eight 32-bit grid entries: entry `k` indexed by byte `k % 4` of `lo` (k < 4) or `hi`,
/// plus bit `k` of `high` as the ninth index bit.
#[inline(always)]
fn grid4(_: Avx2, grid: &[u32], lo: u32, hi: u32, high: u32) -> __m256i {
    let entry = |word: u32, k: u32| {
        let index = ((word >> (8 * (k % 4))) & 0xFF) | (((high >> k) & 1) << 8);
        grid[index as usize] as i32
    };
    // Inserted lane by lane (a vector load of eight scalar stores would wait on store
    // forwarding).
    // SAFETY: the token proves AVX2.
    unsafe {
        _mm256_set_epi32(
            entry(hi, 7),
            entry(hi, 6),
            entry(hi, 5),
            entry(hi, 4),
            entry(lo, 3),
            entry(lo, 2),
            entry(lo, 1),
            entry(lo, 0),
        )
    }
}

/// A little-endian u32 at `p`.
///
/// # Safety
///
/// 4 readable bytes at `p`.
#[inline(always)]
pub(super) unsafe fn le_u32(p: *const u8) -> u32 {
    // SAFETY: the caller's contract.
    u32::from_le(unsafe { std::ptr::read_unaligned(p as *const u32) })
}

/// The four index bytes of a little-endian word.
#[inline(always)]
fn bytes4(word: u32) -> [usize; 4] {
    let b = word.to_le_bytes();
    [b[0] as usize, b[1] as usize, b[2] as usize, b[3] as usize]
}

/// IQ2_XXS (66 bytes: `d`, then per sub-block four index bytes and a word of signs and
/// scale).
pub(in crate::quantized::x86) struct Iq2Xxs;

impl SubBlocks for Iq2Xxs {
    const BLOCK_BYTES: usize = 66;
    const FACTOR: f32 = 0.125;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: bytes `2 + 8ib .. 10 + 8ib` of the block.
        let (idx, aux) = unsafe { (le_u32(wp.add(2 + 8 * ib)), le_u32(wp.add(6 + 8 * ib))) };
        let ls = 2 * (aux >> 28) as i32 + 1;
        SubBlock {
            u: grid8(s, &IQ2XXS_GRID, bytes4(idx)),
            s: patterned_signs(s, aux),
            scales: scales32(s, ls),
        }
    }
}

/// IQ2_XS (74 bytes: `d`, 32 words of 9-bit index and 7-bit signs, 8 scale bytes).
pub(in crate::quantized::x86) struct Iq2Xs;

impl SubBlocks for Iq2Xs {
    const BLOCK_BYTES: usize = 74;
    const FACTOR: f32 = 0.125;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: words `4ib..4ib + 4` and scale byte `ib` of the block.
        let (lo, hi, sc) = unsafe {
            (
                le_u32(wp.add(2 + 8 * ib)),
                le_u32(wp.add(6 + 8 * ib)),
                *wp.add(66 + ib) as i32,
            )
        };
        let q = [lo & 0xFFFF, lo >> 16, hi & 0xFFFF, hi >> 16];
        let index = [
            (q[0] & 511) as usize,
            (q[1] & 511) as usize,
            (q[2] & 511) as usize,
            (q[3] & 511) as usize,
        ];
        let sign = |k: usize| KEVEN_SIGNS[(q[k] >> 9) as usize] as i64;
        SubBlock {
            u: grid8(s, &IQ2XS_GRID, index),
            // SAFETY: the token proves AVX2.
            s: unsafe { _mm256_set_epi64x(sign(3), sign(2), sign(1), sign(0)) },
            scales: scales16(s, 2 * (sc & 0xF) + 1, 2 * (sc >> 4) + 1),
        }
    }
}

/// IQ2_S (82 bytes: `d`, 32 low index bytes, 32 sign bytes, 8 high-index bytes, 8 scale
/// bytes).
pub(in crate::quantized::x86) struct Iq2S;

impl SubBlocks for Iq2S {
    const BLOCK_BYTES: usize = 82;
    const FACTOR: f32 = 0.125;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: index bytes, high bits, scale and sign bytes of sub-block `ib` of the
        // block; AVX2 present.
        unsafe {
            let low = bytes4(le_u32(wp.add(2 + 4 * ib)));
            let (qh, sc) = (*wp.add(66 + ib) as usize, *wp.add(74 + ib) as i32);
            let index = [
                low[0] | ((qh << 8) & 0x300),
                low[1] | ((qh << 6) & 0x300),
                low[2] | ((qh << 4) & 0x300),
                low[3] | ((qh << 2) & 0x300),
            ];
            SubBlock {
                u: grid8(s, &IQ2S_GRID, index),
                s: explicit_signs(s, wp.add(34 + 4 * ib)),
                scales: scales16(s, 2 * (sc & 0xF) + 1, 2 * (sc >> 4) + 1),
            }
        }
    }
}

/// IQ3_XXS (98 bytes: `d`, 64 index bytes, per sub-block a word of signs and scale).
pub(in crate::quantized::x86) struct Iq3Xxs;

impl SubBlocks for Iq3Xxs {
    const BLOCK_BYTES: usize = 98;
    const FACTOR: f32 = 0.25;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: the index bytes and the sign word of sub-block `ib` of the block.
        let (lo, hi, aux) = unsafe {
            (
                le_u32(wp.add(2 + 8 * ib)),
                le_u32(wp.add(6 + 8 * ib)),
                le_u32(wp.add(66 + 4 * ib)),
            )
        };
        let ls = 2 * (aux >> 28) as i32 + 1;
        SubBlock {
            u: grid4(s, &IQ3XXS_GRID, lo, hi, 0),
            s: patterned_signs(s, aux),
            scales: scales32(s, ls),
        }
    }
}

/// IQ3_S (110 bytes: `d`, 64 low index bytes, 8 high-bit bytes, 32 sign bytes, 4 scale
/// bytes).
pub(in crate::quantized::x86) struct Iq3S;

impl SubBlocks for Iq3S {
    const BLOCK_BYTES: usize = 110;
    const FACTOR: f32 = 1.0;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: index bytes, high bits, sign bytes and scale byte of sub-block `ib` of
        // a readable 110-byte block; AVX2 present (the caller's contract).
        unsafe {
            let (lo, hi) = (le_u32(wp.add(2 + 8 * ib)), le_u32(wp.add(6 + 8 * ib)));
            let qh = *wp.add(66 + ib) as u32;
            let scale = (*wp.add(106 + ib / 2) >> (4 * (ib % 2)) & 0xF) as i32;
            SubBlock {
                u: grid4(s, &IQ3S_GRID, lo, hi, qh),
                s: explicit_signs(s, wp.add(74 + 4 * ib)),
                scales: scales32(s, 2 * scale + 1),
            }
        }
    }
}
