//! ggml's Q8_1: 32 values per block, f16 scale, f16 `d * sum(q)`, signed 8-bit quants
//! (`x = d * q`). The activation format paired with Q4_1 and Q5_1 weights: the stored sum
//! lets their minimum enter the dot product as one multiply.

use half::f16;

use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q8_1 block.
const QK: usize = 32;

/// A Q8_1 block, byte-compatible with ggml's `block_q8_1` (36 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_1 {
    /// Scale (`d`).
    pub d: f16,
    /// `d * sum(qs)`, rounded to f16 (`s`).
    pub s: f16,
    /// Quants, one per value.
    pub qs: [i8; QK],
}

const _: () = assert!(size_of::<BlockQ8_1>() == DType::Q8_1.block_bytes());

impl QuantizeBlock for BlockQ8_1 {
    /// ggml's `quantize_row_q8_1_ref`: as Q8_0, plus `s = d * sum(q)` computed from the
    /// f32 `d`.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let qs: [i8; QK] = std::array::from_fn(|j| (x[j] * id).round() as i8);
        let sum: i32 = qs.iter().map(|&q| q as i32).sum();
        Self {
            d: f16::from_f32(d),
            s: f16::from_f32(sum as f32 * d),
            qs,
        }
    }
}

impl QuantBlock for BlockQ8_1 {
    const DTYPE: DType = DType::Q8_1;

    /// ggml has no `dequantize_row_q8_1`; this is the format's meaning, `x = d * q`.
    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (out, &q) in y.iter_mut().zip(&self.qs) {
            *out = q as f32 * d;
        }
    }
}

impl QuantDot for BlockQ8_1 {
    type Activation = BlockQ8_1;

    /// Q8_1 against Q8_1 (ggml defines no such kernel): `sumi * (d_w * d_a)`, as Q8_0.
    fn dot_block(&self, act: &BlockQ8_1) -> f32 {
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

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ8_1::quantize_block(&[0.0; QK]);
        assert_eq!(
            (block.d.to_f32(), block.s.to_f32(), block.qs),
            (0.0, 0.0, [0; QK])
        );
    }

    #[test]
    fn sum_field_is_scaled_quant_sum() {
        let x: [f32; QK] = std::array::from_fn(|j| j as f32 - 10.0);
        let block = BlockQ8_1::quantize_block(&x);
        let sum: i32 = block.qs.iter().map(|&q| q as i32).sum();
        let d = 21.0f32 / 127.0;
        assert_eq!(block.s, f16::from_f32(sum as f32 * d));
        assert!((block.s.to_f32() - x.iter().sum::<f32>()).abs() < 0.5);
    }

    #[test]
    fn constant_block_maps_to_127() {
        let block = BlockQ8_1::quantize_block(&[3.0; QK]);
        assert_eq!(block.qs, [127; QK]);
        assert!((block.s.to_f32() - 96.0).abs() < 0.1);
    }

    #[test]
    fn extremes_round_trip_closely() {
        let mut x = [0.25f32; QK];
        x[31] = 60000.0;
        let mut y = [0f32; QK];
        BlockQ8_1::quantize_block(&x).dequantize_block(&mut y);
        assert!((y[31] - 60000.0).abs() <= 32.0);
    }
}
