//! ggml's IQ3_S: 256-value super-blocks, 3.44 bits per value. Each 4 values are a 9-bit
//! index into a 512-entry grid (8 bits in `qs`, 1 in `qh`), each value has a sign bit and
//! each 32 values a 4-bit scale.

use half::f16;

use super::iq_grids::{IQ3S_GRID, entry4};
use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::signed_grid::{self, SignedGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ3_S super-block, byte-compatible with ggml's `block_iq3_s` (110 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ3S {
    /// Super-block scale.
    pub d: f16,
    /// The low 8 bits of the grid indices, two per group of eight.
    pub qs: [u8; 64],
    /// Per 32 values: the ninth bit of its eight indices (bit `k` for index `k`).
    pub qh: [u8; 8],
    /// Per group of eight: its sign bits (bit `j`: value `j` negative).
    pub signs: [u8; 32],
    /// Per 64 values: the scales of the first (low nibble) and second 32.
    pub scales: [u8; 4],
}

const _: () = assert!(size_of::<BlockIQ3S>() == DType::IQ3S.block_bytes());

impl SignedGrid for BlockIQ3S {
    const SHIFT: i32 = 0;

    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    fn group(&self, g: usize) -> ([u8; 8], u8, i32) {
        let (ib, l) = (g / 4, g % 4);
        let high = self.qh[ib] as usize;
        let first = self.qs[2 * g] as usize | ((high << (8 - 2 * l)) & 256);
        let second = self.qs[2 * g + 1] as usize | ((high << (7 - 2 * l)) & 256);
        let (first, second) = (entry4(&IQ3S_GRID, first), entry4(&IQ3S_GRID, second));
        let magnitudes = std::array::from_fn(|j| if j < 4 { first[j] } else { second[j - 4] });
        let s = self.scales[ib / 2] >> (4 * (ib % 2)) & 0xF;
        (magnitudes, self.signs[g], 2 * s as i32 + 1)
    }
}

impl QuantBlock for BlockIQ3S {
    const DTYPE: DType = DType::IQ3S;

    fn dequantize_block(&self, dst: &mut [f32]) {
        signed_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ3S {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq3_s_q8_K`: see [`signed_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        signed_grid::dot(self, act)
    }
}
