//! ggml's IQ1_M: 256-value super-blocks, 1.75 bits per value. Each 8 values are an 11-bit
//! index into the ternary grid (8 bits in `qs`, 3 in a nibble of `qh`, whose fourth bit is
//! the sign of the group's delta); each 16 values have a 3-bit scale, and the super-block's
//! f16 scale is spread over the top nibbles of the four 16-bit scale words.

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, block_values_mut};
use super::ternary_grid::{self, TernaryGrid};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// An IQ1_M super-block, byte-compatible with ggml's `block_iq1_m` (56 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ1M {
    /// The low 8 bits of each group's grid index.
    pub qs: [u8; 32],
    /// Per pair of groups: for each (low nibble first) the high 3 bits of its index and
    /// its delta's sign (bit 3: negative).
    pub qh: [u8; 16],
    /// Four little-endian 16-bit words: per 64 values four 3-bit scales (one per 16
    /// values, bits `3k..3k+3`) and, in bits 12..16, a nibble of the f16 super-block
    /// scale (word `k` holds its bits `4k..4k+4`).
    pub scales: [u8; 8],
}

const _: () = assert!(size_of::<BlockIQ1M>() == DType::IQ1M.block_bytes());

impl BlockIQ1M {
    /// Scale word `k`.
    fn word(&self, k: usize) -> u16 {
        u16::from_le_bytes([self.scales[2 * k], self.scales[2 * k + 1]])
    }
}

impl TernaryGrid for BlockIQ1M {
    fn d(&self) -> f32 {
        let bits = (0..4).fold(0u16, |d, k| d | ((self.word(k) >> 12) << (4 * k)));
        f16::from_bits(bits).to_f32()
    }

    fn group(&self, g: usize) -> (usize, bool, i32) {
        let (ib, l) = (g / 4, g % 4);
        let nibble = (self.qh[2 * ib + l / 2] >> (4 * (l % 2))) as usize & 0xF;
        let index = self.qs[g] as usize | ((nibble & 7) << 8);
        let shift = 6 * (ib % 2) + 3 * (l / 2);
        let s = (self.word(ib / 2) >> shift) & 7;
        (index, nibble & 8 != 0, 2 * s as i32 + 1)
    }
}

impl QuantBlock for BlockIQ1M {
    const DTYPE: DType = DType::IQ1M;

    fn dequantize_block(&self, dst: &mut [f32]) {
        ternary_grid::dequantize(self, block_values_mut::<256>(dst, Self::DTYPE));
    }
}

impl QuantDot for BlockIQ1M {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_iq1_m_q8_K`: see [`ternary_grid`].
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        ternary_grid::dot(self, act)
    }
}
