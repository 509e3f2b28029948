//! Dequantization of weight rows while packing (the prefill GEMM over block-quantized
//! weights). The 32-value formats get loops the compiler vectorizes; a K-quant block is
//! decoded into 256 levels and sixteen sub-block scales ([`KBlock`], shared with the AVX2
//! decoder in `dequant_avx2`) and then scaled 16 values at a time (the reference decodes
//! each value through its own bit-position lookup, a visible share of a K-quant prefill).
//! Both compute exactly what the reference `dequantize_row` computes (`level · d (− m)`
//! in f32, the same operations in the same order), which the tests check bit for bit.

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

/// [`dequantize_blocks`] inlined into its caller (compiled for the caller's ISA: the
/// attention kernel's staging of a quantized KV cache).
#[inline(always)]
pub(crate) fn dequantize_blocks_inline(dtype: DType, src: &[u8], out: &mut [f32]) {
    let bb = dtype.block_bytes();
    match dtype {
        DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0
            if out.len() == src.len() / bb * 32 =>
        {
            for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(32)) {
                let (y0, y1) = y.split_at_mut(16);
                let d = f16_le(b, 0);
                match dtype {
                    DType::Q4_0 => {
                        for j in 0..16 {
                            y0[j] = ((b[2 + j] & 0xF) as i32 - 8) as f32 * d;
                            y1[j] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
                        }
                    }
                    DType::Q4_1 => {
                        let m = f16_le(b, 2);
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
                        let m = f16_le(b, 2);
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
            let mut block = KBlock::new();
            for (b, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(QK_K)) {
                block.read_scales(dtype, b);
                k_levels(dtype, b, &mut block.levels);
                for ((y, levels), (&dl, &ml)) in y
                    .chunks_exact_mut(16)
                    .zip(block.levels.chunks_exact(16))
                    .zip(block.dl.iter().zip(&block.ml))
                {
                    for (o, &l) in y.iter_mut().zip(levels) {
                        *o = dl * l as f32 - ml;
                    }
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
pub(super) const QK_K: usize = 256;

/// The f16 at `b[at..at + 2]` (little-endian) as f32.
#[inline(always)]
fn f16_le(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// One K-quant super-block decoded: value `16j + l` is `dl[j] · levels[16j + l] − ml[j]`,
/// the reference's `dl · level (− ml)` with the same operations (`x − 0` is `x` bit for
/// bit where a format has no offset).
pub(super) struct KBlock {
    /// The 256 levels (signed, offsets applied).
    pub(super) levels: [i8; QK_K],
    /// Each 16-value sub-block's scale.
    pub(super) dl: [f32; 16],
    /// Each 16-value sub-block's offset (zero for Q3_K and Q6_K).
    pub(super) ml: [f32; 16],
}

impl KBlock {
    /// A zeroed block.
    pub(super) fn new() -> KBlock {
        KBlock {
            levels: [0; QK_K],
            dl: [0.0; 16],
            ml: [0.0; 16],
        }
    }

    /// Sets `dl` and `ml` from block `b` of `dtype` (Q2_K, Q3_K, Q4_K, Q5_K or Q6_K; any
    /// other leaves them).
    #[inline(always)]
    pub(super) fn read_scales(&mut self, dtype: DType, b: &[u8]) {
        match dtype {
            // `scales[16] qs[64] d dmin`: nibbles of `scales[j]`.
            DType::Q2K => {
                let (d, min) = (f16_le(b, 80), f16_le(b, 82));
                for (j, &sc) in b[..16].iter().enumerate() {
                    self.dl[j] = d * (sc & 0xF) as f32;
                    self.ml[j] = min * (sc >> 4) as f32;
                }
            }
            // `hmask[32] qs[64] scales[12] d`: sixteen 6-bit scales minus 32.
            DType::Q3K => {
                let (d, packed) = (f16_le(b, 108), &b[96..108]);
                for j in 0..16 {
                    let low = if j < 8 {
                        packed[j] & 0xF
                    } else {
                        packed[j - 8] >> 4
                    };
                    let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
                    self.dl[j] = d * ((low | (high << 4)) as i32 - 32) as f32;
                    self.ml[j] = 0.0;
                }
            }
            // `d dmin scales[12] ...`: a scale and a min per 32 values, written twice.
            DType::Q4K | DType::Q5K => {
                let (d, min) = (f16_le(b, 0), f16_le(b, 2));
                let packed: &[u8; 12] = b[4..16].try_into().expect("12 scale bytes");
                for j in 0..8 {
                    let (sc, m) = tempra_tensor::quant::scale_min(j, packed);
                    self.dl[2 * j..2 * j + 2].fill(d * sc as f32);
                    self.ml[2 * j..2 * j + 2].fill(min * m as f32);
                }
            }
            // `ql[128] qh[64] scales:i8[16] d`.
            DType::Q6K => {
                let d = f16_le(b, 208);
                for j in 0..16 {
                    self.dl[j] = d * (b[192 + j] as i8) as f32;
                    self.ml[j] = 0.0;
                }
            }
            _ => {}
        }
    }
}

/// The 256 levels of K-quant block `b` (bit layouts as `dequant_avx2`'s decoders read
/// them: Q2_K value `128n + 32j + l` is bits `2j` of `qs[32n + l]`; Q3_K adds `-4` unless
/// bit `4n + j` of `hmask[l]` is set; Q4_K value `64p + 32h + l` is nibble `h` of
/// `qs[32p + l]`, Q5_K with bit `2p + h` of `qh[l]` above it; Q6_K value `128n + 32k + l`
/// is nibble `k / 2` of `ql[64n + 32(k % 2) + l]` with bits `2k` of `qh[32n + l]` above,
/// minus 32).
#[inline(always)]
fn k_levels(dtype: DType, b: &[u8], levels: &mut [i8; QK_K]) {
    // `level(run, l)`: value `32·run + l`; one monomorphized loop per format.
    #[inline(always)]
    fn fill(levels: &mut [i8; QK_K], level: impl Fn(usize, usize) -> u8) {
        for (run, out) in levels.chunks_exact_mut(32).enumerate() {
            for (l, o) in out.iter_mut().enumerate() {
                *o = level(run, l) as i8;
            }
        }
    }
    match dtype {
        DType::Q2K => fill(levels, |run, l| {
            (b[16 + 32 * (run / 4) + l] >> (2 * (run % 4))) & 3
        }),
        DType::Q3K => fill(levels, |run, l| {
            let low = (b[32 + 32 * (run / 4) + l] >> (2 * (run % 4))) & 3;
            (low | (((b[l] >> run) & 1) << 2)).wrapping_sub(4)
        }),
        DType::Q4K => fill(levels, |run, l| {
            (b[16 + 32 * (run / 2) + l] >> (4 * (run % 2))) & 0xF
        }),
        DType::Q5K => fill(levels, |run, l| {
            let low = (b[48 + 32 * (run / 2) + l] >> (4 * (run % 2))) & 0xF;
            low | (((b[16 + l] >> run) & 1) << 4)
        }),
        _ => fill(levels, |run, l| {
            let (n, k) = (run / 4, run % 4);
            let low = (b[64 * n + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
            (low | (((b[128 + 32 * n + l] >> (2 * k)) & 3) << 4)).wrapping_sub(32)
        }),
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
