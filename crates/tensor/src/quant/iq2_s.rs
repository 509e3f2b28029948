//! ggml's IQ2_S: 256-value super-blocks, 2.56 bits per value. Each 8 values are a 10-bit
//! index into a 1024-entry grid (8 bits in `qs`, 2 in `qh`) and eight explicit sign bits;
//! each 16 values have a 4-bit scale.

use half::f16;

use super::iq_grids::{IQ2S_GRID, entry8};
use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::signed_grid::{self, SignedGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ2_S super-block, byte-compatible with ggml's `block_iq2_s` (82 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ2S {
    /// Super-block scale.
    pub d: f16,
    /// Bytes 0..32: the low 8 bits of each group's grid index; bytes 32..64: each group's
    /// sign bits (bit `j`: value `j` negative).
    pub qs: [u8; 64],
    /// Per 32 values: the high 2 bits of its four groups' indices (bits `2l..2l+2`).
    pub qh: [u8; 8],
    /// Per 32 values: the scales of its first (low nibble) and second 16 values.
    pub scales: [u8; 8],
}

const _: () = assert!(size_of::<BlockIQ2S>() == DType::IQ2S.block_bytes());

impl SignedGrid for BlockIQ2S {
    const SHIFT: i32 = 3;

    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    fn group(&self, g: usize) -> ([u8; 8], u8, i32) {
        let (ib, l) = (g / 4, g % 4);
        let index = self.qs[g] as usize | ((self.qh[ib] as usize) << (8 - 2 * l) & 0x300);
        let s = self.scales[ib] >> (4 * (l / 2)) & 0xF;
        (entry8(&IQ2S_GRID, index), self.qs[32 + g], 2 * s as i32 + 1)
    }
}

impl QuantBlock for BlockIQ2S {
    const DTYPE: DType = DType::IQ2S;

    fn dequantize_block(&self, dst: &mut [f32]) {
        signed_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ2S {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq2_s_q8_K`: see [`signed_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        signed_grid::dot(self, act)
    }
}
