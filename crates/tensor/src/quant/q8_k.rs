//! ggml's Q8_K: 256-value super-blocks with an f32 scale, signed 8-bit quants and the
//! sums of each 16 quants (`x = d * q`). The activation format paired with every K-quant:
//! the block sums let the weights' mins enter the dot product without touching the
//! quants again.

use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::scale_search::nearest_int;
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q8_K super-block.
const QK_K: usize = 256;

/// A Q8_K super-block, byte-compatible with ggml's `block_q8_K` (292 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8K {
    /// Scale.
    pub d: f32,
    /// Quants, one per value.
    pub qs: [i8; QK_K],
    /// `bsums[j]` is the sum of `qs[16*j..16*j + 16]`.
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(size_of::<BlockQ8K>() == DType::Q8K.block_bytes());

impl QuantizeBlock for BlockQ8K {
    /// ggml's `quantize_row_q8_K_ref`: the value of largest magnitude maps to -127 (so
    /// `d` may be negative), quants round half to even. An all-zero input gives an
    /// all-zero block (ggml leaves `bsums` unwritten there).
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut block: Self = bytemuck::Zeroable::zeroed();
        if amax == 0.0 {
            return block;
        }
        let iscale = -127.0 / max;
        for (q, &v) in block.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (sum, group) in block.bsums.iter_mut().zip(block.qs.as_chunks::<16>().0) {
            *sum = group.iter().map(|&q| q as i16).sum();
        }
        block.d = 1.0 / iscale;
        block
    }
}

impl QuantBlock for BlockQ8K {
    const DTYPE: DType = DType::Q8K;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK_K>(dst, Self::DTYPE);
        for (out, &q) in y.iter_mut().zip(&self.qs) {
            *out = self.d * q as f32;
        }
    }
}

impl QuantDot for BlockQ8K {
    type Activation = BlockQ8K;

    /// Q8_K against Q8_K (ggml defines no such kernel): `sumi * (d_w * d_a)`.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        let sumi: i32 = self
            .qs
            .iter()
            .zip(&act.qs)
            .map(|(&w, &a)| w as i32 * a as i32)
            .sum();
        sumi as f32 * (self.d * act.d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_give_an_all_zero_block() {
        let block = BlockQ8K::quantize_block(&[0.0; QK_K]);
        assert_eq!(bytemuck::bytes_of(&block), &[0u8; 292][..]);
    }

    #[test]
    fn constant_block_is_exact_in_f32() {
        let block = BlockQ8K::quantize_block(&[2.0; QK_K]);
        assert_eq!(block.qs, [-127; QK_K]);
        assert_eq!(block.bsums, [-127 * 16; 16]);
        let mut y = [0f32; QK_K];
        block.dequantize_block(&mut y);
        for v in y {
            assert!((v - 2.0).abs() < 1e-6);
        }
    }

    #[test]
    fn block_sums_match_quants() {
        let x: [f32; QK_K] = std::array::from_fn(|e| ((e * 37) % 101) as f32 - 50.0);
        let block = BlockQ8K::quantize_block(&x);
        for j in 0..16 {
            let sum: i16 = block.qs[16 * j..16 * j + 16]
                .iter()
                .map(|&q| q as i16)
                .sum();
            assert_eq!(block.bsums[j], sum);
        }
    }

    #[test]
    fn extremes_round_trip_closely() {
        let mut x = [1e-3f32; QK_K];
        x[7] = 1e30;
        x[8] = -1e30;
        let mut y = [0f32; QK_K];
        BlockQ8K::quantize_block(&x).dequantize_block(&mut y);
        assert!((y[7] / 1e30 - 1.0).abs() < 1e-6);
        assert!((y[8] / 1e30 + 1.0).abs() < 1e-6);
        assert_eq!(y[0], 0.0);
    }
}
