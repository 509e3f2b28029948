//! Dequantization of weight rows while packing (the prefill GEMM over block-quantized
//! weights). Every format gets loops over 16 or 32 values the compiler vectorizes (the
//! reference decodes each value through its own bit-position lookup: Q3_K's was 9 % of a
//! Q3_K_M prefill); they compute exactly what the reference `dequantize_row` computes
//! (`level · d (+ m)` in f32, the same operations in the same order), which the tests
//! check bit for bit.

use half::f16;
use tempra_tensor::DType;

/// Dequantizes the whole blocks in `src` (blocks of `dtype`, any alignment) into `out`
/// (`blocks · block_len` values). Malformed lengths give NaNs (the callers slice whole
/// blocks, so they never do).
pub(crate) fn dequantize_blocks(dtype: DType, src: &[u8], out: &mut [f32]) {
    dequantize_blocks_inline(dtype, src, out);
}

/// [`dequantize_blocks`] for AVX2: the K-quants by `dequant_avx2`'s intrinsics, the
/// 32-value formats by the same loops compiled 8 wide (Rust never contracts `a * b - c`
/// into an FMA, so the values stay bit-identical).
///
/// # Safety
///
/// AVX2, FMA and F16C present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dequantize_blocks_avx2(dtype: DType, src: &[u8], out: &mut [f32]) {
    // SAFETY: AVX2 present (this function's contract).
    if !unsafe { super::dequant_avx2::dequantize_k_blocks(dtype, src, out) } {
        dequantize_blocks_inline(dtype, src, out);
    }
}

#[inline(always)]
fn dequantize_blocks_inline(dtype: DType, src: &[u8], out: &mut [f32]) {
    let bb = dtype.block_bytes();
    let f16_at = |b: &[u8], i: usize| f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32();
    match dtype {
        DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0
            if out.len() == src.len() / bb * 32 =>
        {
            for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(32)) {
                let (y0, y1) = y.split_at_mut(16);
                let d = f16_at(b, 0);
                match dtype {
                    DType::Q4_0 => {
                        for j in 0..16 {
                            y0[j] = ((b[2 + j] & 0xF) as i32 - 8) as f32 * d;
                            y1[j] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
                        }
                    }
                    DType::Q4_1 => {
                        let m = f16_at(b, 2);
                        for j in 0..16 {
                            y0[j] = (b[4 + j] & 0xF) as f32 * d + m;
                            y1[j] = (b[4 + j] >> 4) as f32 * d + m;
                        }
                    }
                    DType::Q5_0 => {
                        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                        for j in 0..16 {
                            let lo = (b[6 + j] & 0xF) as u32 | ((qh >> j) & 1) << 4;
                            let hi = (b[6 + j] >> 4) as u32 | ((qh >> (j + 16)) & 1) << 4;
                            y0[j] = (lo as i32 - 16) as f32 * d;
                            y1[j] = (hi as i32 - 16) as f32 * d;
                        }
                    }
                    DType::Q5_1 => {
                        let m = f16_at(b, 2);
                        let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
                        for j in 0..16 {
                            let lo = (b[8 + j] & 0xF) as u32 | ((qh >> j) & 1) << 4;
                            let hi = (b[8 + j] >> 4) as u32 | ((qh >> (j + 16)) & 1) << 4;
                            y0[j] = lo as f32 * d + m;
                            y1[j] = hi as f32 * d + m;
                        }
                    }
                    _ => {
                        for (o, &q) in y.iter_mut().zip(&b[2..34]) {
                            *o = q as i8 as f32 * d;
                        }
                    }
                }
            }
        }
        DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K
            if out.len() == src.len() / bb * QK_K =>
        {
            for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(QK_K)) {
                let y: &mut [f32; QK_K] = y.try_into().expect("a whole block");
                match dtype {
                    DType::Q2K => q2_k(b, y),
                    DType::Q3K => q3_k(b, y),
                    DType::Q4K => q4_k(b, y, None),
                    DType::Q5K => q4_k(b, y, Some(&b[16..48])),
                    _ => q6_k(b, y),
                }
            }
        }
        _ => {
            if tempra_tensor::quant::dequantize_row(dtype, src, out).is_err() {
                out.fill(f32::NAN);
            }
        }
    }
}

/// Values per K-quant super-block.
const QK_K: usize = 256;

#[inline(always)]
fn f16_le(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Q2_K (`scales[16] qs[64] d dmin`): value `128n + 32j + l` is bits `2j` of `qs[32n + l]`,
/// sub-block scale and min the nibbles of `scales[(128n + 32j + l) / 16]`.
#[inline(always)]
fn q2_k(b: &[u8], y: &mut [f32; QK_K]) {
    let (d, min) = (f16_le(b, 80), f16_le(b, 82));
    for (n, qs) in b[16..80].chunks_exact(32).enumerate() {
        for j in 0..4 {
            for (h, (q, out)) in qs
                .chunks_exact(16)
                .zip(y[128 * n + 32 * j..].chunks_exact_mut(16))
                .enumerate()
            {
                let sc = b[8 * n + 2 * j + h];
                let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
                for (o, &q) in out.iter_mut().zip(q) {
                    *o = dl * ((q >> (2 * j)) & 3) as f32 - ml;
                }
            }
        }
    }
}

/// Q3_K (`hmask[32] qs[64] scales[12] d`): value `128n + 32j + l` has low bits `2j` of
/// `qs[32n + l]` and `-4` unless bit `4n + j` of `hmask[l]` is set; sixteen 6-bit scales
/// minus 32.
#[inline(always)]
fn q3_k(b: &[u8], y: &mut [f32; QK_K]) {
    let d = f16_le(b, 108);
    let packed = &b[96..108];
    let scales: [i32; 16] = std::array::from_fn(|j| {
        let low = if j < 8 {
            packed[j] & 0xF
        } else {
            packed[j - 8] >> 4
        };
        let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        (low | (high << 4)) as i32 - 32
    });
    let hmask = &b[0..32];
    for (n, qs) in b[32..96].chunks_exact(32).enumerate() {
        for j in 0..4 {
            let bit = 4 * n + j;
            for (h, out) in y[128 * n + 32 * j..]
                .chunks_exact_mut(16)
                .take(2)
                .enumerate()
            {
                let dl = d * scales[8 * n + 2 * j + h] as f32;
                let (q, hm) = (&qs[16 * h..16 * h + 16], &hmask[16 * h..16 * h + 16]);
                for ((o, &q), &m) in out.iter_mut().zip(q).zip(hm) {
                    let level = ((q >> (2 * j)) & 3) as i32 - 4 * (1 - ((m >> bit) & 1) as i32);
                    *o = dl * level as f32;
                }
            }
        }
    }
}

/// Q4_K (`d dmin scales[12] qs[128]`) and Q5_K (`qh[32]` before `qs`): value `64p + 32h + l`
/// is nibble `h` of `qs[32p + l]` (plus bit `2p + h` of `qh[l]` as bit 4 for Q5_K).
#[inline(always)]
fn q4_k(b: &[u8], y: &mut [f32; QK_K], qh: Option<&[u8]>) {
    let (d, min) = (f16_le(b, 0), f16_le(b, 2));
    let packed: &[u8; 12] = b[4..16].try_into().expect("12 scale bytes");
    let qs = &b[if qh.is_some() { 48 } else { 16 }..][..128];
    for (p, q) in qs.chunks_exact(32).enumerate() {
        for h in 0..2 {
            let j = 2 * p + h;
            let (sc, m) = tempra_tensor::quant::scale_min(j, packed);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let out = &mut y[32 * j..32 * j + 32];
            match qh {
                None => {
                    for (o, &q) in out.iter_mut().zip(q) {
                        *o = d1 * ((q >> (4 * h)) & 0xF) as f32 - m1;
                    }
                }
                Some(qh) => {
                    for ((o, &q), &hb) in out.iter_mut().zip(q).zip(qh) {
                        let level = ((q >> (4 * h)) & 0xF) | (((hb >> j) & 1) << 4);
                        *o = d1 * level as f32 - m1;
                    }
                }
            }
        }
    }
}

/// Q6_K (`ql[128] qh[64] scales:i8[16] d`): value `128n + 32k + l` is nibble `k / 2` of
/// `ql[64n + 32(k % 2) + l]` with bits `2k` of `qh[32n + l]` above it, minus 32.
#[inline(always)]
fn q6_k(b: &[u8], y: &mut [f32; QK_K]) {
    let d = f16_le(b, 208);
    for n in 0..2 {
        let (ql, qh) = (&b[64 * n..64 * n + 64], &b[128 + 32 * n..128 + 32 * n + 32]);
        for k in 0..4 {
            let low = &ql[32 * (k % 2)..32 * (k % 2) + 32];
            for (h, out) in y[128 * n + 32 * k..]
                .chunks_exact_mut(16)
                .take(2)
                .enumerate()
            {
                let dl = d * (b[192 + 8 * n + 2 * k + h] as i8) as f32;
                let (lo, hi) = (&low[16 * h..16 * h + 16], &qh[16 * h..16 * h + 16]);
                for ((o, &l), &hb) in out.iter_mut().zip(lo).zip(hi) {
                    let level =
                        (((l >> (4 * (k / 2))) & 0xF) | (((hb >> (2 * k)) & 3) << 4)) as i32 - 32;
                    *o = dl * level as f32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tempra_tensor::quant::{dequantize_row, quantize_row};

    use super::*;

    #[test]
    fn matches_the_reference_bit_for_bit() {
        for dtype in [
            DType::Q4_0,
            DType::Q4_1,
            DType::Q5_0,
            DType::Q5_1,
            DType::Q8_0,
            DType::Q2K,
            DType::Q3K,
            DType::Q4K,
            DType::Q5K,
            DType::Q6K,
        ] {
            let n = 3 * dtype.block_len();
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 7919) % 113) as f32 / 40.0 - 1.3)
                .collect();
            let mut q = vec![0u8; dtype.bytes_for(n).unwrap()];
            quantize_row(dtype, &x, &mut q).unwrap();
            let (mut want, mut got) = (vec![0f32; n], vec![0f32; n]);
            dequantize_row(dtype, &q, &mut want).unwrap();
            dequantize_blocks(dtype, &q, &mut got);
            assert_eq!(got, want, "{dtype}");
            #[cfg(target_arch = "x86_64")]
            if crate::gemm::avx2_kernel().is_some() {
                got.fill(0.0);
                // SAFETY: the AVX2 kernel is only offered where AVX2/FMA/F16C exist.
                unsafe { dequantize_blocks_avx2(dtype, &q, &mut got) };
                assert_eq!(got, want, "{dtype} (AVX2)");
            }
        }
    }
}
