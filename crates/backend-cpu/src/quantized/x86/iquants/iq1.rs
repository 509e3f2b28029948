//! IQ1_S and IQ1_M's sub-blocks. A value is `d · ls · (g + δ)` with `g` in -1, 0, 1 from
//! the ternary grid and `δ = ±1/8`; the kernel multiplies the integers `8g ± 1` (never
//! zero) and scales the block's sum by 1/8, so the delta costs nothing per activation
//! row.

use std::arch::x86_64::*;

use tempra_tensor::quant::iq_grids::IQ1S_GRID;

use super::super::vectors::fp16;
use super::grid::{SubBlock, SubBlocks, grid8, le_u32, scales16, scales32};
use crate::x86::Avx2;

/// `8g + δ` for four groups of eight grid values, `δ` given per group as eight bytes of
/// +1 (0x01) or −1 (0xFF).
#[inline(always)]
fn shifted(s: Avx2, index: [usize; 4], deltas: __m256i) -> SubBlock {
    let g = grid8(s, &IQ1S_GRID, index);
    // SAFETY: the token proves AVX2.
    unsafe {
        let w = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), deltas);
        SubBlock {
            u: _mm256_sign_epi8(w, w),
            s: w,
            scales: _mm256_setzero_si256(),
        }
    }
}

/// Eight bytes of a group's delta sign.
#[inline(always)]
fn delta_bytes(negative: bool) -> i64 {
    if negative { -1 } else { 0x0101_0101_0101_0101 }
}

/// IQ1_S (50 bytes: `d`, 32 low index bytes, per sub-block a word of high index bits,
/// scale and delta sign).
pub(in crate::quantized::x86) struct Iq1S;

impl SubBlocks for Iq1S {
    const BLOCK_BYTES: usize = 50;
    const FACTOR: f32 = 0.125;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: the index bytes and the `qh` word of sub-block `ib` of the block.
        let (low, qh) = unsafe {
            (
                le_u32(wp.add(2 + 4 * ib)),
                u16::from_le_bytes([*wp.add(34 + 2 * ib), *wp.add(35 + 2 * ib)]) as usize,
            )
        };
        let mut index = [0usize; 4];
        for (l, i) in index.iter_mut().enumerate() {
            *i = ((low >> (8 * l)) & 0xFF) as usize | (((qh >> (3 * l)) & 7) << 8);
        }
        let delta = delta_bytes(qh & 0x8000 != 0);
        // SAFETY: the token proves AVX2.
        let mut sub = shifted(s, index, unsafe { _mm256_set1_epi64x(delta) });
        let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
        sub.scales = scales32(s, ls);
        sub
    }
}

/// IQ1_M (56 bytes: 32 low index bytes, 16 bytes of high index bits and delta signs (a
/// nibble per group), four 16-bit scale words holding the f16 `d` in their top nibbles).
pub(in crate::quantized::x86) struct Iq1M;

impl Iq1M {
    /// Scale word `k`.
    ///
    /// # Safety
    ///
    /// `wp` points to a readable 56-byte block.
    #[inline(always)]
    unsafe fn word(wp: *const u8, k: usize) -> u32 {
        // SAFETY: bytes `48 + 2k`, `49 + 2k` of the block.
        unsafe { u16::from_le_bytes([*wp.add(48 + 2 * k), *wp.add(49 + 2 * k)]) as u32 }
    }
}

impl SubBlocks for Iq1M {
    const BLOCK_BYTES: usize = 56;
    const FACTOR: f32 = 0.125;

    #[inline(always)]
    unsafe fn d(s: Avx2, wp: *const u8) -> f32 {
        // SAFETY: the four scale words of a readable block (the caller's contract).
        let bits = unsafe {
            (Self::word(wp, 0) >> 12)
                | ((Self::word(wp, 1) >> 8) & 0x00F0)
                | ((Self::word(wp, 2) >> 4) & 0x0F00)
                | (Self::word(wp, 3) & 0xF000)
        };
        let bits = (bits as u16).to_le_bytes();
        // SAFETY: 2 readable bytes; F16C present (the caller's contract).
        unsafe { fp16(s, bits.as_ptr()) }
    }

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: the index bytes, the two `qh` bytes and the scale word of sub-block
        // `ib` of the block.
        let (low, qh, word) = unsafe {
            (
                le_u32(wp.add(4 * ib)),
                u16::from_le_bytes([*wp.add(32 + 2 * ib), *wp.add(33 + 2 * ib)]) as usize,
                Self::word(wp, ib / 2),
            )
        };
        let mut index = [0usize; 4];
        let mut deltas = [0i64; 4];
        for l in 0..4 {
            let nibble = (qh >> (4 * l)) & 0xF;
            index[l] = ((low >> (8 * l)) & 0xFF) as usize | ((nibble & 7) << 8);
            deltas[l] = delta_bytes(nibble & 8 != 0);
        }
        // SAFETY: the token proves AVX2.
        let deltas = unsafe { _mm256_set_epi64x(deltas[3], deltas[2], deltas[1], deltas[0]) };
        let mut sub = shifted(s, index, deltas);
        let shift = 6 * (ib % 2);
        let ls1 = 2 * ((word >> shift) & 7) as i32 + 1;
        let ls2 = 2 * ((word >> (shift + 3)) & 7) as i32 + 1;
        sub.scales = scales16(s, ls1, ls2);
        sub
    }
}
