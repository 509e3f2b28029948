//! AVX2 dequantization of K-quant super-blocks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) while
//! packing: the 256 levels of a block are unpacked 32 at a time with byte shifts and
//! masks, then each 16-value sub-block becomes `dl · level − ml` in two 8-wide steps.
//! The scales come out of the same scalar arithmetic as the reference `dequantize_row`
//! (`d · scale` in f32), and `level · dl − ml` is a separate multiply and subtract (as
//! there; for the formats without mins `ml = 0`, and `x − 0 = x` bit for bit), so the
//! values are identical.

use std::arch::x86_64::*;

use half::f16;
use tempra_tensor::DType;

/// Values per super-block.
const QK_K: usize = 256;

/// One super-block's levels and its sixteen sub-blocks' `dl` and `ml`.
struct Decoded {
    levels: [i8; QK_K],
    dl: [f32; 16],
    ml: [f32; 16],
}

fn f16_le(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

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
    let mut block = Decoded {
        levels: [0; QK_K],
        dl: [0.0; 16],
        ml: [0.0; 16],
    };
    for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(QK_K)) {
        // Direct calls, so the decoders inline here and compile with AVX2.
        match dtype {
            DType::Q2K => q2_k(b, &mut block),
            DType::Q3K => q3_k(b, &mut block),
            DType::Q4K => q4_k(b, &mut block),
            DType::Q5K => q5_k(b, &mut block),
            _ => q6_k(b, &mut block),
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

/// Q2_K (`scales[16] qs[64] d dmin`).
#[inline(always)]
fn q2_k(b: &[u8], out: &mut Decoded) {
    let (d, min) = (f16_le(b, 80), f16_le(b, 82));
    for j in 0..16 {
        let sc = b[j];
        out.dl[j] = d * (sc & 0xF) as f32;
        out.ml[j] = min * (sc >> 4) as f32;
    }
    for n in 0..2 {
        let q = load32(b, 16 + 32 * n);
        for j in 0..4 {
            put(&mut out.levels, 128 * n + 32 * j, bits(q, 2 * j as u32, 3));
        }
    }
}

/// Q3_K (`hmask[32] qs[64] scales[12] d`).
#[inline(always)]
fn q3_k(b: &[u8], out: &mut Decoded) {
    let d = f16_le(b, 108);
    let packed = &b[96..108];
    for j in 0..16 {
        let low = if j < 8 {
            packed[j] & 0xF
        } else {
            packed[j - 8] >> 4
        };
        let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out.dl[j] = d * ((low | (high << 4)) as i32 - 32) as f32;
        out.ml[j] = 0.0;
    }
    let hmask = load32(b, 0);
    for n in 0..2 {
        let q = load32(b, 32 + 32 * n);
        for j in 0..4 {
            let low = bits(q, 2 * j as u32, 3);
            let high = bits(hmask, (4 * n + j) as u32, 1);
            put(&mut out.levels, 128 * n + 32 * j, join::<2>(low, high, 4));
        }
    }
}

/// Q4_K/Q5_K scales and mins, each 32-value sub-block's pair written twice.
#[inline(always)]
fn k4_scales(b: &[u8], out: &mut Decoded) {
    let (d, min) = (f16_le(b, 0), f16_le(b, 2));
    let packed: &[u8; 12] = b[4..16].try_into().expect("12 scale bytes");
    for j in 0..8 {
        let (sc, m) = tempra_tensor::quant::scale_min(j, packed);
        let (dl, ml) = (d * sc as f32, min * m as f32);
        out.dl[2 * j..2 * j + 2].fill(dl);
        out.ml[2 * j..2 * j + 2].fill(ml);
    }
}

/// Q4_K (`d dmin scales[12] qs[128]`).
#[inline(always)]
fn q4_k(b: &[u8], out: &mut Decoded) {
    k4_scales(b, out);
    for p in 0..4 {
        let q = load32(b, 16 + 32 * p);
        put(&mut out.levels, 64 * p, bits(q, 0, 0xF));
        put(&mut out.levels, 64 * p + 32, bits(q, 4, 0xF));
    }
}

/// Q5_K (`d dmin scales[12] qh[32] qs[128]`).
#[inline(always)]
fn q5_k(b: &[u8], out: &mut Decoded) {
    k4_scales(b, out);
    let qh = load32(b, 16);
    for p in 0..4 {
        let q = load32(b, 48 + 32 * p);
        for h in 0..2 {
            let low = bits(q, 4 * h as u32, 0xF);
            let high = bits(qh, (2 * p + h) as u32, 1);
            put(&mut out.levels, 64 * p + 32 * h, join::<4>(low, high, 0));
        }
    }
}

/// Q6_K (`ql[128] qh[64] scales:i8[16] d`).
#[inline(always)]
fn q6_k(b: &[u8], out: &mut Decoded) {
    let d = f16_le(b, 208);
    for j in 0..16 {
        out.dl[j] = d * (b[192 + j] as i8) as f32;
        out.ml[j] = 0.0;
    }
    for n in 0..2 {
        let qh = load32(b, 128 + 32 * n);
        for k in 0..4 {
            let low = bits(load32(b, 64 * n + 32 * (k % 2)), 4 * (k / 2) as u32, 0xF);
            let high = bits(qh, 2 * k as u32, 3);
            put(&mut out.levels, 128 * n + 32 * k, join::<4>(low, high, 32));
        }
    }
}
