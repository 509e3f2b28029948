//! ggml's IQ2_XXS: 256-value super-blocks, 2.06 bits per value. Each 32 values are four
//! 8-value entries of a 256-entry grid (one index byte each), four 7-bit sign patterns
//! and a 4-bit scale, packed in two 32-bit words.

use half::f16;

use super::iq_grids::{IQ2XXS_GRID, entry8, signs8};
use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::signed_grid::{self, SignedGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ2_XXS super-block, byte-compatible with ggml's `block_iq2_xxs` (66 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ2XXS {
    /// Super-block scale.
    pub d: f16,
    /// Per 32 values, two little-endian words: the first holds the four grid indices (one
    /// byte each), the second four 7-bit sign patterns (bits `7l..7l+7`) and the scale
    /// `s` (bits 28..32).
    pub qs: [u16; 32],
}

const _: () = assert!(size_of::<BlockIQ2XXS>() == DType::IQ2XXS.block_bytes());

impl SignedGrid for BlockIQ2XXS {
    const SHIFT: i32 = 3;

    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    fn group(&self, g: usize) -> ([u8; 8], u8, i32) {
        let (ib, l) = (g / 4, g % 4);
        let bytes: &[u8] = bytemuck::cast_slice(&self.qs);
        let aux = signed_grid::le_u32(bytes, 8 * ib + 4);
        let index = bytes[8 * ib + l] as usize;
        let signs = signs8((aux >> (7 * l)) as usize);
        (
            entry8(&IQ2XXS_GRID, index),
            signs,
            2 * (aux >> 28) as i32 + 1,
        )
    }
}

impl QuantBlock for BlockIQ2XXS {
    const DTYPE: DType = DType::IQ2XXS;

    fn dequantize_block(&self, dst: &mut [f32]) {
        signed_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ2XXS {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq2_xxs_q8_K`: see [`signed_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        signed_grid::dot(self, act)
    }
}
