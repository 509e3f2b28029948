//! ggml's Q4_1: 32 values per block, f16 scale and minimum, 4-bit quants
//! (`x = d * q + m`).

use half::f16;

use super::q8_1::BlockQ8_1;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q4_1 block.
const QK: usize = 32;

/// A Q4_1 block, byte-compatible with ggml's `block_q4_1` (20 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_1 {
    /// Scale (`d`).
    pub d: f16,
    /// Minimum (`m`), the value of level 0.
    pub m: f16,
    /// Quants: byte `j` holds value `j` in its low nibble and value `j + 16` in its high
    /// nibble.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockQ4_1>() == DType::Q4_1.block_bytes());

impl BlockQ4_1 {
    /// Quant `j` (0..32), a level in `0..16`.
    fn level(&self, j: usize) -> i32 {
        let byte = self.qs[j % (QK / 2)];
        (if j < QK / 2 { byte & 0xF } else { byte >> 4 }) as i32
    }
}

impl QuantizeBlock for BlockQ4_1 {
    /// ggml's `quantize_row_q4_1_ref`: levels span `min..=max` in 15 steps.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let (mut min, mut max) = (f32::MAX, -f32::MAX);
        for &v in x {
            if v < min {
                min = v;
            }
            if v > max {
                max = v;
            }
        }
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let quant = |v: f32| (((v - min) * id + 0.5) as i8).min(15) as u8;
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = quant(x[j]) | (quant(x[j + QK / 2]) << 4);
        }
        Self {
            d: f16::from_f32(d),
            m: f16::from_f32(min),
            qs,
        }
    }
}

impl QuantBlock for BlockQ4_1 {
    const DTYPE: DType = DType::Q4_1;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (j, out) in y.iter_mut().enumerate() {
            *out = self.level(j) as f32 * d + m;
        }
    }
}

impl QuantDot for BlockQ4_1 {
    type Activation = BlockQ8_1;

    /// ggml's `ggml_vec_dot_q4_1_q8_1`: `(d_w * d_a) * sumi + m_w * s_a`, where the
    /// activation's `s` carries `d_a * sum(q_a)`.
    fn dot_block(&self, act: &BlockQ8_1) -> f32 {
        let sumi: i32 = (0..QK).map(|j| self.level(j) * act.qs[j] as i32).sum();
        self.d.to_f32() * act.d.to_f32() * sumi as f32 + self.m.to_f32() * act.s.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK]) -> [f32; QK] {
        let mut y = [0f32; QK];
        BlockQ4_1::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ4_1::quantize_block(&[0.0; QK]);
        assert_eq!((block.d.to_f32(), block.m.to_f32()), (0.0, 0.0));
        assert_eq!(block.qs, [0; QK / 2]);
        assert_eq!(round_trip(&[0.0; QK]), [0.0; QK]);
    }

    #[test]
    fn constant_block_is_its_minimum() {
        assert_eq!(round_trip(&[-2.5; QK]), [-2.5; QK]);
        assert_eq!(round_trip(&[7.0; QK]), [7.0; QK]);
    }

    #[test]
    fn grid_values_are_exact() {
        let x: [f32; QK] = std::array::from_fn(|j| (j % 16) as f32 * 0.5 - 3.0);
        assert_eq!(round_trip(&x), x);
    }

    #[test]
    fn extremes_stay_in_range() {
        let mut x = [0.0f32; QK];
        x[0] = -30000.0;
        x[31] = 30000.0;
        let y = round_trip(&x);
        assert_eq!(y[0], -30000.0);
        assert_eq!(y[31], 30000.0);
        assert!(y[1].abs() <= 2000.0);
    }
}
