//! ggml's TQ1_0: 256-value super-blocks of ternary values (-1, 0, 1 times one f16 scale),
//! 1.69 bits per value: five base-3 digits per byte in `qs`, four in `qh`, each byte
//! holding its digits as the fraction `byte / 256` of `3^5` (so digit `n` is
//! `((byte · 3^n) mod 256) · 3 >> 8`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::ternary::{self, QK_K, Ternary};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// `3^n`.
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// A TQ1_0 super-block, byte-compatible with ggml's `block_tq1_0` (54 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockTQ1_0 {
    /// Five digits per byte: bytes 0..32 hold values `32n + m` (digit `n` of byte `m`),
    /// bytes 32..48 values `160 + 16n + m`.
    pub qs: [u8; 48],
    /// Four digits per byte: values `240 + 4n + j` (digit `n` of byte `j`).
    pub qh: [u8; 4],
    /// Scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockTQ1_0>() == DType::TQ1_0.block_bytes());

/// Digit `n` (0..5) of a packed byte, as -1, 0 or 1.
fn digit(byte: u8, n: usize) -> i32 {
    let q = byte.wrapping_mul(POW3[n]);
    ((q as u16 * 3) >> 8) as i32 - 1
}

/// Packs base-3 digits (`-1..=1` after rounding, most significant first) into a byte as
/// ggml does: `ceil(Σ digit · 3^k · 256 / 243)`.
fn pack(digits: impl Iterator<Item = i32>) -> u8 {
    let q = digits.fold(0u8, |q, xi| q.wrapping_mul(3).wrapping_add(xi as u8));
    (q as u16 * 256).div_ceil(243) as u8
}

impl BlockTQ1_0 {
    /// Each value's stored code `t + 1` (0, 1 or 2), in value order.
    pub fn codes(&self) -> [u8; QK_K] {
        std::array::from_fn(|i| (self.value(i) + 1) as u8)
    }

    /// The block of the codes `t + 1` (each 0..=2, in value order) and the scale `d`,
    /// packed as ggml's quantizer packs them, so [`BlockTQ1_0::codes`] gives them back.
    pub fn from_codes(codes: &[u8; QK_K], d: f16) -> Self {
        let t = |i: usize| codes[i] as i32;
        let mut block = Self {
            qs: [0; 48],
            qh: [0; 4],
            d,
        };
        for m in 0..32 {
            block.qs[m] = pack((0..5).map(|n| t(32 * n + m)));
        }
        for m in 0..16 {
            block.qs[32 + m] = pack((0..5).map(|n| t(160 + 16 * n + m)));
        }
        for j in 0..4 {
            // Four digits, then a zero fifth so the first is the most significant trit.
            block.qh[j] = pack((0..4).map(|n| t(240 + 4 * n + j)).chain([0]));
        }
        block
    }
}

impl Ternary for BlockTQ1_0 {
    fn d(&self) -> f32 {
        self.d.to_f32()
    }

    /// Value `i`'s digit, -1, 0 or 1.
    fn value(&self, i: usize) -> i32 {
        match i {
            0..160 => digit(self.qs[i % 32], i / 32),
            160..240 => digit(self.qs[32 + (i - 160) % 16], (i - 160) / 16),
            _ => digit(self.qh[(i - 240) % 4], (i - 240) / 4),
        }
    }
}

impl QuantBlock for BlockTQ1_0 {
    const DTYPE: DType = DType::TQ1_0;

    fn dequantize_block(&self, dst: &mut [f32]) {
        ternary::dequantize(self, block_values_mut::<QK_K>(dst, Self::DTYPE));
    }
}

impl QuantizeBlock for BlockTQ1_0 {
    /// ggml's `quantize_row_tq1_0_ref`: `d` is the largest magnitude, each value
    /// `round(x / d)` (half away from zero).
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let (d, id) = ternary::scale(x);
        // The digits of finite inputs are 0..=2 (a NaN's cast gives 1).
        let codes = std::array::from_fn(|i| ternary::digit(x[i], id) as u8);
        Self::from_codes(&codes, f16::from_f32(d))
    }
}

impl QuantDot for BlockTQ1_0 {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_tq1_0_q8_K`: `Σ value · q` scaled by `d_w · d_a`.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        ternary::dot(self, act)
    }
}
