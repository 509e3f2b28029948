//! ggml's IQ2_XS: 256-value super-blocks, 2.31 bits per value. Each 8 values are one
//! 16-bit word: a 9-bit index into a 512-entry grid and a 7-bit sign pattern; each 16
//! values have a 4-bit scale.

use half::f16;

use super::iq_grids::{IQ2XS_GRID, entry8, signs8};
use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::signed_grid::{self, SignedGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ2_XS super-block, byte-compatible with ggml's `block_iq2_xs` (74 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ2XS {
    /// Super-block scale.
    pub d: f16,
    /// Per 8 values: grid index (bits 0..9) and sign pattern (bits 9..16).
    pub qs: [u16; 32],
    /// Per 32 values: the scales of its first (low nibble) and second 16 values.
    pub scales: [u8; 8],
}

const _: () = assert!(size_of::<BlockIQ2XS>() == DType::IQ2XS.block_bytes());

impl SignedGrid for BlockIQ2XS {
    const SHIFT: i32 = 3;

    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    fn group(&self, g: usize) -> ([u8; 8], u8, i32) {
        let q = self.qs[g] as usize;
        let s = self.scales[g / 4] >> (4 * ((g % 4) / 2)) & 0xF;
        (
            entry8(&IQ2XS_GRID, q & 511),
            signs8(q >> 9),
            2 * s as i32 + 1,
        )
    }
}

impl QuantBlock for BlockIQ2XS {
    const DTYPE: DType = DType::IQ2XS;

    fn dequantize_block(&self, dst: &mut [f32]) {
        signed_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ2XS {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq2_xs_q8_K`: see [`signed_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        signed_grid::dot(self, act)
    }
}
