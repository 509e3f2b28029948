//! ggml's IQ1_S: 256-value super-blocks, 1.56 bits per value. Each 8 values are an 11-bit
//! index into the ternary grid (8 bits in `qs`, 3 in `qh`); each 32 values share a 3-bit
//! scale and the sign of their delta, in the top bits of their `qh` word.

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::ternary_grid::{self, TernaryGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ1_S super-block, byte-compatible with ggml's `block_iq1_s` (50 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ1S {
    /// Super-block scale.
    pub d: f16,
    /// The low 8 bits of each group's grid index.
    pub qs: [u8; 32],
    /// Per 32 values: the high 3 bits of its four indices (bits `3l..3l+3`), the scale
    /// (bits 12..15) and the delta's sign (bit 15: negative).
    pub qh: [u16; 8],
}

const _: () = assert!(size_of::<BlockIQ1S>() == DType::IQ1S.block_bytes());

impl TernaryGrid for BlockIQ1S {
    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    fn group(&self, g: usize) -> (usize, bool, i32) {
        let (qh, l) = (self.qh[g / 4] as usize, g % 4);
        let index = self.qs[g] as usize | (((qh >> (3 * l)) & 7) << 8);
        (index, qh & 0x8000 != 0, 2 * ((qh >> 12) & 7) as i32 + 1)
    }
}

impl QuantBlock for BlockIQ1S {
    const DTYPE: DType = DType::IQ1S;

    fn dequantize_block(&self, dst: &mut [f32]) {
        ternary_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ1S {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq1_s_q8_K`: see [`ternary_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        ternary_grid::dot(self, act)
    }
}
