//! Dequantization of weight rows while packing (the prefill GEMM over block-quantized
//! weights). The 32-value formats get loops the compiler vectorizes; they compute exactly
//! what the reference `dequantize_row` computes (`level · d (+ m)` in f32), which the
//! other formats call directly.

use half::f16;
use tempra_tensor::DType;

/// Dequantizes the whole blocks in `src` (blocks of `dtype`, any alignment) into `out`
/// (`blocks · block_len` values). Malformed lengths give NaNs (the callers slice whole
/// blocks, so they never do).
pub(crate) fn dequantize_blocks(dtype: DType, src: &[u8], out: &mut [f32]) {
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
        _ => {
            if tempra_tensor::quant::dequantize_row(dtype, src, out).is_err() {
                out.fill(f32::NAN);
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
            DType::Q4K,
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
        }
    }
}
