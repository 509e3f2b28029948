//! ggml's IQ3_XXS: 256-value super-blocks, 3.06 bits per value. Each 8 values are two
//! 4-value entries of a 256-entry grid (one index byte each) and a 7-bit sign pattern;
//! each 32 values have a 4-bit scale, packed with their four sign patterns in one word.

use half::f16;

use super::iq_grids::{IQ3XXS_GRID, entry4, signs8};
use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::signed_grid::{self, SignedGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ3_XXS super-block, byte-compatible with ggml's `block_iq3_xxs` (98 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ3XXS {
    /// Super-block scale.
    pub d: f16,
    /// Bytes 0..64: grid indices, two per group of eight; bytes 64..96: per 32 values a
    /// little-endian word of four 7-bit sign patterns (bits `7l..7l+7`) and the scale
    /// (bits 28..32).
    pub qs: [u8; 96],
}

const _: () = assert!(size_of::<BlockIQ3XXS>() == DType::IQ3XXS.block_bytes());

impl SignedGrid for BlockIQ3XXS {
    const SHIFT: i32 = 2;

    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    fn group(&self, g: usize) -> ([u8; 8], u8, i32) {
        let (ib, l) = (g / 4, g % 4);
        let aux = signed_grid::le_u32(&self.qs, 64 + 4 * ib);
        let first = entry4(&IQ3XXS_GRID, self.qs[2 * g] as usize);
        let second = entry4(&IQ3XXS_GRID, self.qs[2 * g + 1] as usize);
        let magnitudes = std::array::from_fn(|j| if j < 4 { first[j] } else { second[j - 4] });
        let signs = signs8((aux >> (7 * l)) as usize);
        (magnitudes, signs, 2 * (aux >> 28) as i32 + 1)
    }
}

impl QuantBlock for BlockIQ3XXS {
    const DTYPE: DType = DType::IQ3XXS;

    fn dequantize_block(&self, dst: &mut [f32]) {
        signed_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ3XXS {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq3_xxs_q8_K`: see [`signed_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        signed_grid::dot(self, act)
    }
}
