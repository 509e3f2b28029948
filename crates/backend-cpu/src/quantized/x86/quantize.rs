//! AVX2 activation quantizers for Q8_0 and Q8_K, bit-exact with the scalar reference
//! (`tempra_tensor::quant`, ggml's `quantize_row_q8_0_ref` and `quantize_row_q8_K_ref`),
//! eight lanes at a time. Q8_0: the same f32 `amax / 127` scale, the same `1 / d`
//! multiplier and round-half-away-from-zero (`roundf`). Q8_K: the same `-127 / max`
//! multiplier (`max` the first value of largest magnitude), round-half-to-even (the
//! reference's `nearest_int`, which is what `cvtps2dq` does in the default rounding
//! mode), the clamp to 127 and the 16-value sums. Other formats go to the reference.

use std::arch::x86_64::*;

use tempra_tensor::{DType, Result};

use crate::quantized::kernels::{BlockStats, quantize_portable, stats_fit};

/// Values per Q8_0 block.
const QK: usize = 32;
/// Bytes per Q8_0 block (`d: f16`, `qs: [i8; 32]`).
const BLOCK_BYTES: usize = 34;

/// Values per Q8_K block.
const QK_K: usize = 256;
/// Bytes per Q8_K block (`d: f32`, `qs: [i8; 256]`, `bsums: [i16; 16]`).
const BLOCK_K_BYTES: usize = 292;

/// Quantizes `src` into `dtype` blocks: Q8_0 and Q8_K with AVX2 when this CPU has it,
/// with `stats` each Q8_0 block's scale and `Σ qs` as well; every other case through the
/// portable quantizer (which also reports length errors and misfit stats).
pub(super) fn quantize_activations(
    dtype: DType,
    src: &[f32],
    dst: &mut [u8],
    mut stats: Option<BlockStats<'_>>,
) -> Result<()> {
    let fits_k = src.len().is_multiple_of(QK_K) && dst.len() == src.len() / QK_K * BLOCK_K_BYTES;
    if dtype == DType::Q8K && stats.is_none() && fits_k && super::detected() {
        for (x, block) in src
            .chunks_exact(QK_K)
            .zip(dst.chunks_exact_mut(BLOCK_K_BYTES))
        {
            // SAFETY: AVX2 and FMA were detected just above; `x` holds 256 values and
            // `block` 292 bytes.
            unsafe { quantize_block_q8_k(x, block) };
        }
        return Ok(());
    }
    let fits = src.len().is_multiple_of(QK) && dst.len() == src.len() / QK * BLOCK_BYTES;
    if dtype == DType::Q8_0 && fits && super::detected() {
        stats_fit(dtype, src.len(), stats.as_ref())?;
        let blocks = src.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES));
        for (b, (x, block)) in blocks.enumerate() {
            // SAFETY: AVX2, FMA and F16C were detected just above; `x` holds 32 values and
            // `block` 34 bytes.
            let (scale, sum) = unsafe { quantize_block_q8_0(x, block) };
            if let Some(stats) = stats.as_mut() {
                (stats.scales[b], stats.sums[b]) = (scale, sum);
            }
        }
        return Ok(());
    }
    quantize_portable(dtype, src, dst, stats)
}

/// One Q8_0 block; returns its scale (the stored f16 `d` as f32) and `Σ qs`.
///
/// # Safety
///
/// AVX2 and F16C present; `x.len() == 32`, `block.len() == 34`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_block_q8_0(x: &[f32], block: &mut [u8]) -> (f32, i32) {
    let sign = _mm256_set1_ps(-0.0);
    // SAFETY: 32 readable f32s.
    let v: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) });
    let abs = v.map(|v| _mm256_andnot_ps(sign, v));
    let m = _mm256_max_ps(_mm256_max_ps(abs[0], abs[1]), _mm256_max_ps(abs[2], abs[3]));
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    // f32 → f16 rounding to nearest even, as `half` does, and back for the scale.
    let d16 = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d));
    let scale = _mm_cvtss_f32(_mm_cvtph_ps(d16));
    block[..2].copy_from_slice(&(_mm_extract_epi16::<0>(d16) as u16).to_le_bytes());
    let idv = _mm256_set1_ps(id);
    let half = _mm256_set1_ps(0.5);
    let q = v.map(|v| {
        let s = _mm256_mul_ps(v, idv);
        // roundf: truncate, then step away from zero when the dropped part is ≥ 0.5.
        let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(s);
        let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(s, t));
        let step = _mm256_or_ps(_mm256_and_ps(s, sign), _mm256_set1_ps(1.0));
        let up = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, half), step);
        _mm256_cvtps_epi32(_mm256_add_ps(t, up))
    });
    // i32 → i16 → i8 (saturating packs; the values lie in −127..=127), then undo the
    // packs' lane interleave.
    let w = _mm256_packs_epi32(q[0], q[1]);
    let z = _mm256_packs_epi32(q[2], q[3]);
    let b = _mm256_packs_epi16(w, z);
    let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    // SAFETY: 32 writable bytes after the scale.
    unsafe { _mm256_storeu_si256(block.as_mut_ptr().add(2) as *mut __m256i, b) };
    // Σ qs from the i32 lanes (each within ±127: no overflow).
    let s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    let s4 = _mm_add_epi32(
        _mm256_castsi256_si128(s8),
        _mm256_extracti128_si256::<1>(s8),
    );
    let s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    let s1 = _mm_add_epi32(s2, _mm_shuffle_epi32::<0b01>(s2));
    (scale, _mm_cvtsi128_si32(s1))
}

/// One Q8_K block.
///
/// # Safety
///
/// AVX2 present; `x.len() == 256`, `block.len() == 292`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_block_q8_k(x: &[f32], block: &mut [u8]) {
    let sign = _mm256_set1_ps(-0.0);
    // SAFETY: 256 readable f32s.
    let v = |i: usize| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) };
    let mut m = _mm256_setzero_ps();
    for i in 0..QK_K / 8 {
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v(i)));
    }
    let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    let amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    if amax == 0.0 {
        block.fill(0);
        return;
    }
    // The reference keeps the first value whose magnitude is the largest.
    let target = _mm256_set1_ps(amax);
    let max = (0..QK_K / 8)
        .find_map(|i| {
            let hits = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(
                _mm256_andnot_ps(sign, v(i)),
                target,
            ));
            (hits != 0).then(|| x[8 * i + hits.trailing_zeros() as usize])
        })
        .unwrap_or(amax);
    let iscale = -127.0 / max;
    let scale = _mm256_set1_ps(iscale);
    let top = _mm256_set1_epi32(127);
    let q = |i: usize| _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(scale, v(i))), top);
    let unzip = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let flip = _mm256_set1_epi8(-128);
    let mut bsums = [0i16; 16];
    for g in 0..QK_K / 32 {
        // i32 → i16 → i8 (saturating packs; the values lie in −127..=127), then undo the
        // packs' lane interleave.
        let w = _mm256_packs_epi32(q(4 * g), q(4 * g + 1));
        let z = _mm256_packs_epi32(q(4 * g + 2), q(4 * g + 3));
        let b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w, z), unzip);
        // SAFETY: bytes 4 + 32g .. 36 + 32g of the 292-byte block.
        unsafe { _mm256_storeu_si256(block.as_mut_ptr().add(4 + 32 * g) as *mut __m256i, b) };
        // Σ of each 8 signed bytes as Σ (b + 128) − 1024 (`sad` against zero).
        let sad = _mm256_sad_epu8(_mm256_xor_si256(b, flip), _mm256_setzero_si256());
        let mut eight = [0i64; 4];
        // SAFETY: 32 writable bytes.
        unsafe { _mm256_storeu_si256(eight.as_mut_ptr() as *mut __m256i, sad) };
        bsums[2 * g] = (eight[0] + eight[1] - 2048) as i16;
        bsums[2 * g + 1] = (eight[2] + eight[3] - 2048) as i16;
    }
    block[..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    for (out, sum) in block[4 + QK_K..].chunks_exact_mut(2).zip(bsums) {
        out.copy_from_slice(&sum.to_le_bytes());
    }
}
