//! AVX2 dequantization of K-quant super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) while
//! packing: the 256 levels of a block are unpacked 32 at a time with byte shifts and
//! masks, then each 16-value sub-block becomes `dl · level − ml` in two 8-wide steps.
//! The sub-block scales are the portable decoder's (`dequant::KBlock::read_scales`), and
//! `dl · level − ml` is a separate multiply and subtract there and here, so the values are
//! identical to the reference's.

use std::arch::x86_64::*;

use tempra_tensor::DType;

use super::dequant::{KBlock, QK_K};

/// Dequantizes whole K-quant blocks of `dtype` from `src` into `out`; returns `false`
/// (writing nothing) for any other dtype or lengths that are not whole blocks.
///
/// # Safety
///
/// AVX2 present.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dequantize_k_blocks(dtype: DType, src: &[u8], out: &mut [f32]) -> bool {
    let bb = dtype.block_bytes();
    if !matches!(
        dtype,
        DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K
    ) || bb == 0
        || !src.len().is_multiple_of(bb)
        || out.len() != src.len() / bb * QK_K
    {
        return false;
    }
    let mut block = KBlock::new();
    for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(QK_K)) {
        block.read_scales(dtype, b);
        // Direct calls, so the decoders inline here and compile with AVX2.
        let levels = &mut block.levels;
        match dtype {
            DType::Q2K => q2_k(b, levels),
            DType::Q3K => q3_k(b, levels),
            DType::Q4K => q4_k(b, levels),
            DType::Q5K => q5_k(b, levels),
            _ => q6_k(b, levels),
        }
        for (j, y) in y.chunks_exact_mut(16).enumerate() {
            let (dl, ml) = (_mm256_set1_ps(block.dl[j]), _mm256_set1_ps(block.ml[j]));
            for h in 0..2 {
                // SAFETY: 8 levels at `16j + 8h + 8 ≤ 256`, 8 f32s at `8h + 8 ≤ 16` in `y`.
                unsafe {
                    let l8 = _mm_loadl_epi64(block.levels.as_ptr().add(16 * j + 8 * h).cast());
                    let v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(l8));
                    _mm256_storeu_ps(
                        y.as_mut_ptr().add(8 * h),
                        _mm256_sub_ps(_mm256_mul_ps(dl, v), ml),
                    );
                }
            }
        }
    }
    true
}

/// 32 bytes from `b[at..]`.
#[inline(always)]
fn load32(b: &[u8], at: usize) -> __m256i {
    let s = &b[at..at + 32];
    // SAFETY: 32 readable bytes (sliced above); unaligned load.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

/// `(v >> shift) & mask` per byte.
#[inline(always)]
fn bits(v: __m256i, shift: u32, mask: i8) -> __m256i {
    // SAFETY: AVX2 is enabled on every caller (they are inlined into a function that has
    // it).
    unsafe {
        _mm256_and_si256(
            _mm256_srl_epi16(v, _mm_cvtsi32_si128(shift as i32)),
            _mm256_set1_epi8(mask),
        )
    }
}

/// `(low | high << SHIFT) − offset` per byte: a level from its low and high bits.
#[inline(always)]
fn join<const SHIFT: i32>(low: __m256i, high: __m256i, offset: i8) -> __m256i {
    // SAFETY: AVX2 is enabled on every caller (they are inlined into a function that has
    // it).
    unsafe {
        _mm256_sub_epi8(
            _mm256_or_si256(low, _mm256_slli_epi16::<SHIFT>(high)),
            _mm256_set1_epi8(offset),
        )
    }
}

/// Stores 32 levels at `levels[at..]`.
#[inline(always)]
fn put(levels: &mut [i8; QK_K], at: usize, v: __m256i) {
    let s = &mut levels[at..at + 32];
    // SAFETY: 32 writable bytes (sliced above); unaligned store.
    unsafe { _mm256_storeu_si256(s.as_mut_ptr().cast(), v) }
}

/// Q2_K levels (`scales[16] qs[64] d dmin`).
#[inline(always)]
fn q2_k(b: &[u8], levels: &mut [i8; QK_K]) {
    for n in 0..2 {
        let q = load32(b, 16 + 32 * n);
        for j in 0..4 {
            put(levels, 128 * n + 32 * j, bits(q, 2 * j as u32, 3));
        }
    }
}

/// Q3_K levels (`hmask[32] qs[64] scales[12] d`).
#[inline(always)]
fn q3_k(b: &[u8], levels: &mut [i8; QK_K]) {
    let hmask = load32(b, 0);
    for n in 0..2 {
        let q = load32(b, 32 + 32 * n);
        for j in 0..4 {
            let low = bits(q, 2 * j as u32, 3);
            let high = bits(hmask, (4 * n + j) as u32, 1);
            put(levels, 128 * n + 32 * j, join::<2>(low, high, 4));
        }
    }
}

/// Q4_K levels (`d dmin scales[12] qs[128]`).
#[inline(always)]
fn q4_k(b: &[u8], levels: &mut [i8; QK_K]) {
    for p in 0..4 {
        let q = load32(b, 16 + 32 * p);
        put(levels, 64 * p, bits(q, 0, 0xF));
        put(levels, 64 * p + 32, bits(q, 4, 0xF));
    }
}

/// Q5_K levels (`d dmin scales[12] qh[32] qs[128]`).
#[inline(always)]
fn q5_k(b: &[u8], levels: &mut [i8; QK_K]) {
    let qh = load32(b, 16);
    for p in 0..4 {
        let q = load32(b, 48 + 32 * p);
        for h in 0..2 {
            let low = bits(q, 4 * h as u32, 0xF);
            let high = bits(qh, (2 * p + h) as u32, 1);
            put(levels, 64 * p + 32 * h, join::<4>(low, high, 0));
        }
    }
}

/// Q6_K levels (`ql[128] qh[64] scales:i8[16] d`).
#[inline(always)]
fn q6_k(b: &[u8], levels: &mut [i8; QK_K]) {
    for n in 0..2 {
        let qh = load32(b, 128 + 32 * n);
        for k in 0..4 {
            let low = bits(load32(b, 64 * n + 32 * (k % 2)), 4 * (k / 2) as u32, 0xF);
            let high = bits(qh, 2 * k as u32, 3);
            put(levels, 128 * n + 32 * k, join::<4>(low, high, 32));
        }
    }
}
