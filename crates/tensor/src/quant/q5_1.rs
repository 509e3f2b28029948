//! ggml's Q5_1: 32 values per block, f16 scale and minimum, 5-bit quants
//! (`x = d * q + m`); the fifth bits live together in a 32-bit mask.

use half::f16;

use super::q8_1::BlockQ8_1;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q5_1 block.
const QK: usize = 32;

/// A Q5_1 block, byte-compatible with ggml's `block_q5_1` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_1 {
    /// Scale (`d`).
    pub d: f16,
    /// Minimum (`m`), the value of level 0.
    pub m: f16,
    /// Fifth bits: bit `j` of this little-endian `u32` is bit 4 of quant `j`.
    pub qh: [u8; 4],
    /// Low four bits: byte `j` holds quant `j` in its low nibble and quant `j + 16` in
    /// its high nibble.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockQ5_1>() == DType::Q5_1.block_bytes());

impl BlockQ5_1 {
    /// Quant `j` (0..32), a level in `0..32`.
    fn level(&self, j: usize) -> i32 {
        let byte = self.qs[j % (QK / 2)];
        let low = if j < QK / 2 { byte & 0xF } else { byte >> 4 };
        let high = (u32::from_le_bytes(self.qh) >> j) & 1;
        (low as u32 | (high << 4)) as i32
    }
}

impl QuantizeBlock for BlockQ5_1 {
    /// ggml's `quantize_row_q5_1_ref`: levels span `min..=max` in 31 steps.
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
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        // ggml casts to `uint8_t` without clamping; the level cannot exceed 31 for finite
        // input, and the clamp keeps the fifth bit honest for any input.
        let quant = |v: f32| (((v - min) * id + 0.5) as u8).min(31);
        let (mut qs, mut qh) = ([0u8; QK / 2], 0u32);
        for j in 0..QK / 2 {
            let (q0, q1) = (quant(x[j]), quant(x[j + QK / 2]));
            qs[j] = (q0 & 0xF) | ((q1 & 0xF) << 4);
            qh |= ((q0 as u32 & 0x10) >> 4) << j;
            qh |= ((q1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        Self {
            d: f16::from_f32(d),
            m: f16::from_f32(min),
            qh: qh.to_le_bytes(),
            qs,
        }
    }
}

impl QuantBlock for BlockQ5_1 {
    const DTYPE: DType = DType::Q5_1;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (j, out) in y.iter_mut().enumerate() {
            *out = self.level(j) as f32 * d + m;
        }
    }
}

impl QuantDot for BlockQ5_1 {
    type Activation = BlockQ8_1;

    /// ggml's `ggml_vec_dot_q5_1_q8_1`: `(d_w * d_a) * sumi + m_w * s_a`.
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
        BlockQ5_1::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ5_1::quantize_block(&[0.0; QK]);
        assert_eq!((block.qs, block.qh), ([0; QK / 2], [0; 4]));
        assert_eq!(round_trip(&[0.0; QK]), [0.0; QK]);
    }

    #[test]
    fn constant_block_is_its_minimum() {
        assert_eq!(round_trip(&[0.375; QK]), [0.375; QK]);
    }

    #[test]
    fn grid_values_are_exact() {
        let x: [f32; QK] = std::array::from_fn(|j| j as f32 * 0.25 - 1.0);
        assert_eq!(round_trip(&x), x);
    }

    #[test]
    fn extremes_stay_in_range() {
        let mut x = [0.0f32; QK];
        x[3] = -16000.0;
        x[30] = 15000.0;
        let y = round_trip(&x);
        assert_eq!((y[3], y[30], y[0]), (-16000.0, 15000.0, 0.0));
    }
}
