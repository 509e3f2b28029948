//! ggml's Q8_0: 32 values per block, one f16 scale, signed 8-bit quants (`x = d * q`).
//! Also the activation format paired with Q4_0, Q5_0 and Q8_0 weights.

use half::f16;

use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q8_0 block.
const QK: usize = 32;

/// A Q8_0 block, byte-compatible with ggml's `block_q8_0` (34 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0 {
    /// Scale (`d`).
    pub d: f16,
    /// Quants, one per value.
    pub qs: [i8; QK],
}

const _: () = assert!(size_of::<BlockQ8_0>() == DType::Q8_0.block_bytes());

impl QuantizeBlock for BlockQ8_0 {
    /// ggml's `quantize_row_q8_0_ref`: `d = max|x| / 127`, quants rounded half away from
    /// zero.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        Self {
            d: f16::from_f32(d),
            qs: std::array::from_fn(|j| (x[j] * id).round() as i8),
        }
    }
}

impl QuantBlock for BlockQ8_0 {
    const DTYPE: DType = DType::Q8_0;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (out, &q) in y.iter_mut().zip(&self.qs) {
            *out = q as f32 * d;
        }
    }
}

impl QuantDot for BlockQ8_0 {
    type Activation = BlockQ8_0;

    /// ggml's `ggml_vec_dot_q8_0_q8_0`: `sumi * (d_w * d_a)`.
    fn dot_block(&self, act: &BlockQ8_0) -> f32 {
        let sumi: i32 = self
            .qs
            .iter()
            .zip(&act.qs)
            .map(|(&w, &a)| w as i32 * a as i32)
            .sum();
        sumi as f32 * (self.d.to_f32() * act.d.to_f32())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK]) -> [f32; QK] {
        let mut y = [0f32; QK];
        BlockQ8_0::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ8_0::quantize_block(&[0.0; QK]);
        assert_eq!((block.d.to_f32(), block.qs), (0.0, [0; QK]));
    }

    #[test]
    fn constant_block_maps_to_127() {
        let block = BlockQ8_0::quantize_block(&[-5.0; QK]);
        assert_eq!(block.qs, [-127; QK]);
        for y in round_trip(&[-5.0; QK]) {
            assert!((y + 5.0).abs() < 5.0 / 1024.0);
        }
    }

    #[test]
    fn ties_round_away_from_zero() {
        let mut x = [0.0f32; QK];
        x[0] = 127.0;
        x[1] = 0.5;
        x[2] = -0.5;
        x[3] = 2.5;
        let block = BlockQ8_0::quantize_block(&x);
        assert_eq!(&block.qs[..4], &[127, 1, -1, 3]);
    }

    #[test]
    fn extremes_round_trip_closely() {
        let mut x = [1.0f32; QK];
        x[9] = -65000.0;
        let y = round_trip(&x);
        assert!((y[9] + 65000.0).abs() <= 32.0);
        assert_eq!(y[0], 0.0);
    }
}
