//! ggml's TQ2_0: 256-value super-blocks of ternary values (-1, 0, 1 times one f16 scale)
//! in 2 bits each (`x = d · (q − 1)`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::ternary::{self, QK_K, Ternary};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// A TQ2_0 super-block, byte-compatible with ggml's `block_tq2_0` (66 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockTQ2_0 {
    /// Per 128 values, 32 bytes: bits `2n..2n+2` of byte `m` hold `q` of value
    /// `32n + m`.
    pub qs: [u8; QK_K / 4],
    /// Scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockTQ2_0>() == DType::TQ2_0.block_bytes());

impl BlockTQ2_0 {
    /// Each value's stored code `t + 1` (0..=3; 3 is unused by the quantizer), in value
    /// order.
    pub fn codes(&self) -> [u8; QK_K] {
        std::array::from_fn(|i| (self.value(i) + 1) as u8)
    }

    /// The block of the codes `t + 1` (each 0..=3, in value order) and the scale `d`.
    pub fn from_codes(codes: &[u8; QK_K], d: f16) -> Self {
        let mut qs = [0u8; QK_K / 4];
        for (i, &code) in codes.iter().enumerate() {
            let (half, n, m) = (i / 128, (i % 128) / 32, i % 32);
            qs[32 * half + m] |= (code & 3) << (2 * n);
        }
        Self { qs, d }
    }
}

impl Ternary for BlockTQ2_0 {
    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    /// Value `i` as -1, 0, 1 (or 2, for the unused code 3).
    fn value(&self, i: usize) -> i32 {
        let (half, n, m) = (i / 128, (i % 128) / 32, i % 32);
        ((self.qs[32 * half + m] >> (2 * n)) & 3) as i32 - 1
    }
}

impl QuantBlock for BlockTQ2_0 {
    const DTYPE: DType = DType::TQ2_0;

    fn dequantize_block(&self, dst: &mut [f32]) {
        ternary::dequantize(self, block_values_mut::<QK_K>(dst, Self::DTYPE));
    }
}

impl QuantizeBlock for BlockTQ2_0 {
    /// ggml's `quantize_row_tq2_0_ref`: `d` is the largest magnitude, each value
    /// `round(x / d)` (half away from zero).
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let (d, id) = ternary::scale(x);
        let codes = std::array::from_fn(|i| (ternary::digit(x[i], id) & 3) as u8);
        Self::from_codes(&codes, f16::from_f32(d))
    }
}

impl QuantDot for BlockTQ2_0 {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_tq2_0_q8_K`: `Σ (q − 1) · q8` scaled by `d_a · d_w`.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        ternary::dot(self, act)
    }
}
