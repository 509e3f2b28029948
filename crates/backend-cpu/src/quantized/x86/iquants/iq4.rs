//! IQ4_NL and MXFP4 against Q8_0, and IQ4_XS's sub-blocks: the 4-bit indices become
//! signed levels by one byte shuffle through the 16-entry codebook (`KVALUES_IQ4NL`, or
//! MXFP4's doubled E2M1 values), the level's sign moves onto the activation and `maddubs`
//! multiplies its magnitude.

use std::arch::x86_64::*;

use tempra_tensor::quant::iq_grids::KVALUES_IQ4NL;
use tempra_tensor::quant::{KVALUES_MXFP4, e8m0_to_f32_half};

use super::super::row_major::legacy::LegacyFormat;
use super::grid::{SubBlock, SubBlocks};
use crate::x86::Avx2;

/// A 16-entry codebook in both 128-bit halves (for `pshufb`).
#[inline(always)]
fn codebook(_: Avx2, levels: &[i8; 16]) -> __m256i {
    // SAFETY: the token proves AVX2; 16 readable bytes.
    unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(levels.as_ptr() as *const __m128i)) }
}

/// The 32 levels of one 16-byte run of nibbles (byte `j`: value `j` low, `j + 16` high)
/// through `levels`.
///
/// # Safety
///
/// 16 readable bytes at `p`; AVX2 present.
#[inline(always)]
unsafe fn levels32_of(s: Avx2, levels: &[i8; 16], p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let bytes = _mm_loadu_si128(p as *const __m128i);
        let m4 = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(bytes, m4);
        let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), m4);
        _mm256_shuffle_epi8(codebook(s, levels), _mm256_set_m128i(hi, lo))
    }
}

/// [`levels32_of`] through IQ4_NL's codebook.
///
/// # Safety
///
/// 16 readable bytes at `p`; AVX2 present.
#[inline(always)]
unsafe fn levels32(s: Avx2, p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe { levels32_of(s, &KVALUES_IQ4NL, p) }
}

/// IQ4_NL (18 bytes: `d`, 16 bytes of index nibbles): a 32-value format with signed
/// levels, so it runs the legacy formats' kernel against Q8_0 (`(d_w · d_a) · Σ level · q`
/// per block).
pub(in crate::quantized::x86) struct Iq4Nl;

impl LegacyFormat for Iq4Nl {
    const BLOCK_BYTES: usize = 18;
    const HAS_MIN: bool = false;

    #[inline(always)]
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: an 18-byte block at `wp` (the caller's contract).
        unsafe { levels32(s, wp.add(2)) }
    }
}

/// MXFP4 (17 bytes: the E8M0 exponent `e`, 16 bytes of index nibbles): IQ4_NL's kernel
/// with the doubled E2M1 codebook and the scale `2^(e − 128) · d_a`.
pub(in crate::quantized::x86) struct Mxfp4;

impl LegacyFormat for Mxfp4 {
    const BLOCK_BYTES: usize = 17;
    const HAS_MIN: bool = false;

    #[inline(always)]
    unsafe fn levels(s: Avx2, wp: *const u8) -> __m256i {
        // SAFETY: a 17-byte block at `wp` (the caller's contract).
        unsafe { levels32_of(s, &KVALUES_MXFP4, wp.add(1)) }
    }

    #[inline(always)]
    unsafe fn scale_product(_: Avx2, wp: *const u8, ap: *const u8) -> f32 {
        // SAFETY: the exponent byte at `wp` and the Q8_0 block's f16 scale at `ap`.
        let (e, d) = unsafe { (*wp, std::ptr::read_unaligned(ap as *const u16)) };
        e8m0_to_f32_half(e) * half::f16::from_bits(d).to_f32()
    }
}

/// IQ4_XS (136 bytes: `d`, the high scale bits, the low scale nibbles, 128 bytes of index
/// nibbles, 16 per 32-value sub-block).
pub(in crate::quantized::x86) struct Iq4Xs;

impl Iq4Xs {
    /// The signed scales `ls − 32` of sub-blocks `2p` and `2p + 1`.
    ///
    /// # Safety
    ///
    /// `wp` points to a readable 136-byte block.
    #[inline(always)]
    unsafe fn scales(wp: *const u8, p: usize) -> (i32, i32) {
        // SAFETY: the scale fields of the block.
        let (high, low) = unsafe {
            (
                u16::from_le_bytes([*wp.add(2), *wp.add(3)]) as i32 >> (4 * p),
                *wp.add(4 + p) as i32,
            )
        };
        (
            ((low & 0xF) | ((high & 3) << 4)) - 32,
            ((low >> 4) | ((high & 0xC) << 2)) - 32,
        )
    }
}

impl SubBlocks for Iq4Xs {
    const BLOCK_BYTES: usize = 136;
    const FACTOR: f32 = 1.0;

    #[inline(always)]
    unsafe fn sub(s: Avx2, wp: *const u8, ib: usize) -> SubBlock {
        // SAFETY: the caller's contract.
        unsafe { Self::pair(s, wp, ib / 2)[ib % 2] }
    }

    /// One 32-byte load holds both sub-blocks' indices.
    #[inline(always)]
    unsafe fn pair(s: Avx2, wp: *const u8, p: usize) -> [SubBlock; 2] {
        // SAFETY: the two sub-blocks' 32 index bytes and scales of a readable block
        // (the caller's contract); AVX2 present.
        unsafe {
            let v = _mm256_loadu_si256(wp.add(8 + 32 * p) as *const __m256i);
            let m4 = _mm256_set1_epi8(0x0F);
            let lo = _mm256_and_si256(v, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            // Sub-block 2p: the low nibbles then the high ones of the first 16 bytes.
            let w0 = _mm256_shuffle_epi8(
                codebook(s, &KVALUES_IQ4NL),
                _mm256_permute2x128_si256::<0x20>(lo, hi),
            );
            let w1 = _mm256_shuffle_epi8(
                codebook(s, &KVALUES_IQ4NL),
                _mm256_permute2x128_si256::<0x31>(lo, hi),
            );
            let (s0, s1) = Self::scales(wp, p);
            [
                SubBlock {
                    u: _mm256_sign_epi8(w0, w0),
                    s: w0,
                    scales: _mm256_set1_epi16(s0 as i16),
                },
                SubBlock {
                    u: _mm256_sign_epi8(w1, w1),
                    s: w1,
                    scales: _mm256_set1_epi16(s1 as i16),
                },
            ]
        }
    }
}
