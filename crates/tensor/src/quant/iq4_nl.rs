//! ggml's IQ4_NL: 32 values per block, one f16 scale, 4-bit indices into 16 non-linear
//! levels (`x = d · KVALUES_IQ4NL[q]`).

use half::f16;

use super::iq_grids::KVALUES_IQ4NL;
use super::iq4_search::{levels, pack_nibbles, sub_block_scale};
use super::q8_0::BlockQ8_0;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per IQ4_NL block.
const QK: usize = 32;

/// An IQ4_NL block, byte-compatible with ggml's `block_iq4_nl` (18 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ4NL {
    /// Scale (`d`).
    pub d: f16,
    /// Level indices: byte `j` holds value `j` in its low nibble and value `j + 16` in its
    /// high nibble.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockIQ4NL>() == DType::IQ4NL.block_bytes());

impl BlockIQ4NL {
    /// Value `j`'s level (one of the 16 non-linear levels, -127..=113).
    fn level(&self, j: usize) -> i32 {
        let byte = self.qs[j % (QK / 2)];
        let index = if j < QK / 2 { byte & 0xF } else { byte >> 4 };
        KVALUES_IQ4NL[index as usize] as i32
    }
}

impl QuantBlock for BlockIQ4NL {
    const DTYPE: DType = DType::IQ4NL;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (j, out) in y.iter_mut().enumerate() {
            *out = d * self.level(j) as f32;
        }
    }
}

impl QuantizeBlock for BlockIQ4NL {
    /// ggml's `quantize_iq4_nl` without an importance matrix (what `llama-quantize`
    /// writes): the least-squares scale over fifteen trial scales
    /// ([`sub_block_scale`]), then each value's nearest level at that (unrounded) scale.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let d = sub_block_scale(x);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        Self {
            d: f16::from_f32(d),
            qs: pack_nibbles(&levels(x, id)),
        }
    }
}

impl QuantDot for BlockIQ4NL {
    type Activation = BlockQ8_0;

    /// ggml's `ggml_vec_dot_iq4_nl_q8_0`: `(d_a · d_w) · Σ level · q`.
    fn dot_block(&self, act: &BlockQ8_0) -> f32 {
        let sumi: i32 = (0..QK).map(|j| self.level(j) * act.qs[j] as i32).sum();
        act.d.to_f32() * self.d.to_f32() * sumi as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_stay_zero() {
        let block = BlockIQ4NL::quantize_block(&[0.0; QK]);
        assert_eq!(block.d.to_f32(), 0.0);
        assert_eq!(block.qs, [0x88; QK / 2], "index 8 is the level nearest 0");
        let mut y = [1f32; QK];
        block.dequantize_block(&mut y);
        assert_eq!(y, [0.0; QK]);
    }

    #[test]
    fn levels_times_a_scale_round_trip() {
        let x: [f32; QK] = std::array::from_fn(|j| KVALUES_IQ4NL[(j * 7) % 16] as f32 * 0.5);
        let mut y = [0f32; QK];
        BlockIQ4NL::quantize_block(&x).dequantize_block(&mut y);
        assert_eq!(y, x);
    }

    #[test]
    fn nibble_layout_matches_ggml() {
        let block = BlockIQ4NL {
            d: f16::from_f32(1.0),
            qs: std::array::from_fn(|j| (j as u8 & 0xF) | 0xF0),
        };
        let mut y = [0f32; QK];
        block.dequantize_block(&mut y);
        assert_eq!(y[3], KVALUES_IQ4NL[3] as f32);
        assert_eq!(y[16 + 3], 113.0);
    }
}
