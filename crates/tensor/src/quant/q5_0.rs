//! ggml's Q5_0: 32 values per block, one f16 scale, 5-bit quants with offset 16
//! (`x = d * (q - 16)`); the fifth bits live together in a 32-bit mask.

use half::f16;

use super::q8_0::BlockQ8_0;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q5_0 block.
const QK: usize = 32;

/// A Q5_0 block, byte-compatible with ggml's `block_q5_0` (22 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_0 {
    /// Scale (`d`).
    pub d: f16,
    /// Fifth bits: bit `j` of this little-endian `u32` is bit 4 of quant `j`.
    pub qh: [u8; 4],
    /// Low four bits: byte `j` holds quant `j` in its low nibble and quant `j + 16` in
    /// its high nibble.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockQ5_0>() == DType::Q5_0.block_bytes());

impl BlockQ5_0 {
    /// Quant `j` (0..32) as a signed level in `-16..16`.
    fn level(&self, j: usize) -> i32 {
        let byte = self.qs[j % (QK / 2)];
        let low = if j < QK / 2 { byte & 0xF } else { byte >> 4 };
        let high = (u32::from_le_bytes(self.qh) >> j) & 1;
        (low as u32 | (high << 4)) as i32 - 16
    }
}

impl QuantizeBlock for BlockQ5_0 {
    /// ggml's `quantize_row_q5_0_ref`: the value of largest magnitude maps to level -16.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let quant = |v: f32| ((v * id + 16.5) as i8).min(31) as u8;
        let (mut qs, mut qh) = ([0u8; QK / 2], 0u32);
        for j in 0..QK / 2 {
            let (q0, q1) = (quant(x[j]), quant(x[j + QK / 2]));
            qs[j] = (q0 & 0xF) | ((q1 & 0xF) << 4);
            qh |= ((q0 as u32 & 0x10) >> 4) << j;
            qh |= ((q1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        Self {
            d: f16::from_f32(d),
            qh: qh.to_le_bytes(),
            qs,
        }
    }
}

impl QuantBlock for BlockQ5_0 {
    const DTYPE: DType = DType::Q5_0;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (j, out) in y.iter_mut().enumerate() {
            *out = self.level(j) as f32 * d;
        }
    }
}

impl QuantDot for BlockQ5_0 {
    type Activation = BlockQ8_0;

    /// ggml's `ggml_vec_dot_q5_0_q8_0`: `(d_w * d_a) * sumi`.
    fn dot_block(&self, act: &BlockQ8_0) -> f32 {
        let sumi: i32 = (0..QK).map(|j| self.level(j) * act.qs[j] as i32).sum();
        self.d.to_f32() * act.d.to_f32() * sumi as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK]) -> [f32; QK] {
        let mut y = [0f32; QK];
        BlockQ5_0::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ5_0::quantize_block(&[0.0; QK]);
        assert_eq!(block.d.to_f32(), 0.0);
        // Level 0 is quant 16: low nibbles 0, every fifth bit set.
        assert_eq!((block.qs, block.qh), ([0; QK / 2], [0xFF; 4]));
        assert_eq!(round_trip(&[0.0; QK]), [0.0; QK]);
    }

    #[test]
    fn constant_block_is_exact() {
        assert_eq!(round_trip(&[1.25; QK]), [1.25; QK]);
        assert_eq!(round_trip(&[-4.0; QK]), [-4.0; QK]);
    }

    #[test]
    fn grid_values_are_exact() {
        let x: [f32; QK] = std::array::from_fn(|j| j as f32 - 16.0);
        assert_eq!(round_trip(&x), x);
    }

    #[test]
    fn extremes_keep_the_largest_magnitude() {
        let mut x = [0.001f32; QK];
        x[31] = 64000.0;
        let y = round_trip(&x);
        assert_eq!(y[31], 64000.0);
        assert_eq!(y[0], 0.0);
    }
}
