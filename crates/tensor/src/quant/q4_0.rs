//! ggml's Q4_0: 32 values per block, one f16 scale, 4-bit quants with offset 8
//! (`x = d * (q - 8)`).

use half::f16;

use super::q8_0::BlockQ8_0;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q4_0 block.
const QK: usize = 32;

/// A Q4_0 block, byte-compatible with ggml's `block_q4_0` (18 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_0 {
    /// Scale (`d`).
    pub d: f16,
    /// Quants: byte `j` holds value `j` in its low nibble and value `j + 16` in its high
    /// nibble.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockQ4_0>() == DType::Q4_0.block_bytes());

impl BlockQ4_0 {
    /// Quant `j` (0..32) as a signed level in `-8..8`.
    fn level(&self, j: usize) -> i32 {
        let byte = self.qs[j % (QK / 2)];
        let nibble = if j < QK / 2 { byte & 0xF } else { byte >> 4 };
        nibble as i32 - 8
    }
}

impl QuantizeBlock for BlockQ4_0 {
    /// ggml's `quantize_row_q4_0_ref`: the value of largest magnitude maps to level -8.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        // `as i8` truncates toward zero like ggml's `(int8_t)` cast.
        let quant = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = quant(x[j]) | (quant(x[j + QK / 2]) << 4);
        }
        Self {
            d: f16::from_f32(d),
            qs,
        }
    }
}

impl QuantBlock for BlockQ4_0 {
    const DTYPE: DType = DType::Q4_0;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (j, out) in y.iter_mut().enumerate() {
            *out = self.level(j) as f32 * d;
        }
    }
}

impl QuantDot for BlockQ4_0 {
    type Activation = BlockQ8_0;

    /// ggml's `ggml_vec_dot_q4_0_q8_0`: `sumi * d_w * d_a`.
    fn dot_block(&self, act: &BlockQ8_0) -> f32 {
        let sumi: i32 = (0..QK).map(|j| self.level(j) * act.qs[j] as i32).sum();
        sumi as f32 * self.d.to_f32() * act.d.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK]) -> [f32; QK] {
        let mut y = [0f32; QK];
        BlockQ4_0::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ4_0::quantize_block(&[0.0; QK]);
        assert_eq!(block.d.to_f32(), 0.0);
        assert_eq!(block.qs, [0x88; QK / 2]);
        assert_eq!(round_trip(&[0.0; QK]), [0.0; QK]);
    }

    #[test]
    fn constant_block_is_exact() {
        assert_eq!(round_trip(&[-2.0; QK]), [-2.0; QK]);
        assert_eq!(round_trip(&[3.0; QK]), [3.0; QK]);
    }

    #[test]
    fn extremes_keep_the_largest_magnitude() {
        let mut x = [1.0f32; QK];
        x[5] = -60000.0;
        x[20] = 30000.0;
        let y = round_trip(&x);
        assert_eq!(y[5], -60000.0);
        assert!((y[20] - 30000.0).abs() <= 7500.0 / 2.0 + 1.0);
    }

    #[test]
    fn nibble_layout_matches_ggml() {
        let x: [f32; QK] = std::array::from_fn(|j| if j < 16 { -8.0 } else { 7.0 });
        let block = BlockQ4_0::quantize_block(&x);
        assert_eq!(block.d.to_f32(), 1.0);
        assert_eq!(block.qs, [0xF0; QK / 2]);
    }

    #[test]
    #[should_panic(expected = "q4_0 block holds 32 values")]
    fn wrong_block_length_panics_with_a_message() {
        BlockQ4_0::quantize_block(&[0.0; 31]);
    }
}
