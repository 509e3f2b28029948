//! ggml's MXFP4 (the OCP microscaling format gpt-oss ships its experts in): 32 values per
//! block, one E8M0 power-of-two scale, 4-bit E2M1 values (`x = 2^(e−128) · KVALUES[q]`,
//! the levels doubled and the scale halved as ggml stores them).

use super::q8_0::BlockQ8_0;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per MXFP4 block.
const QK: usize = 32;

/// The E2M1 values doubled (ggml's `kvalues_mxfp4`): index 8 is a negative zero.
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// An MXFP4 block, byte-compatible with ggml's `block_mxfp4` (17 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockMXFP4 {
    /// The E8M0 scale exponent: the block's values are `2^(e − 128) · KVALUES_MXFP4[q]`.
    pub e: u8,
    /// Value indices: byte `j` holds value `j` in its low nibble and value `j + 16` in its
    /// high nibble.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockMXFP4>() == DType::MXFP4.block_bytes());

/// `2^(e − 128)` exactly, subnormal for `e < 2` (ggml's `ggml_e8m0_to_fp32_half`).
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e as u32 - 1) << 23
    };
    f32::from_bits(bits)
}

impl BlockMXFP4 {
    /// Value `j`'s doubled E2M1 level.
    fn level(&self, j: usize) -> i32 {
        let byte = self.qs[j % (QK / 2)];
        let index = if j < QK / 2 { byte & 0xF } else { byte >> 4 };
        KVALUES_MXFP4[index as usize] as i32
    }
}

/// The index of the level `KVALUES_MXFP4[i] · d` nearest `x` (the first on ties, as
/// ggml's `best_index_mxfp4` scans).
fn best_index(x: f32, d: f32) -> u8 {
    let mut best = 0;
    let mut best_err = (KVALUES_MXFP4[0] as f32 * d - x).abs();
    for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (k as f32 * d - x).abs();
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

impl QuantBlock for BlockMXFP4 {
    const DTYPE: DType = DType::MXFP4;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK>(dst, Self::DTYPE);
        let d = e8m0_to_f32_half(self.e);
        for (j, out) in y.iter_mut().enumerate() {
            *out = self.level(j) as f32 * d;
        }
    }
}

impl QuantizeBlock for BlockMXFP4 {
    /// ggml's `quantize_row_mxfp4_ref`: the exponent `⌊log2 amax⌋ − 2 + 127` (so the
    /// largest level, 12 halved, covers the block's largest magnitude), then each value's
    /// nearest level. A block whose largest magnitude is below 2^−125 (where ggml's
    /// float-to-byte cast has no defined result) gets exponent 0.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK>(src, Self::DTYPE);
        let amax = x
            .iter()
            .fold(0f32, |m, v| if m < v.abs() { v.abs() } else { m });
        let e = if amax > 0.0 {
            (amax.log2().floor() - 2.0 + 127.0).clamp(0.0, 255.0) as u8
        } else {
            0
        };
        let d = e8m0_to_f32_half(e);
        let mut qs = [0u8; QK / 2];
        for (j, q) in qs.iter_mut().enumerate() {
            *q = best_index(x[j], d) | (best_index(x[j + QK / 2], d) << 4);
        }
        Self { e, qs }
    }
}

impl QuantDot for BlockMXFP4 {
    type Activation = BlockQ8_0;

    /// ggml's `ggml_vec_dot_mxfp4_q8_0`: `(2^(e−128) · d_a) · Σ level · q`.
    fn dot_block(&self, act: &BlockQ8_0) -> f32 {
        let sumi: i32 = (0..QK).map(|j| self.level(j) * act.qs[j] as i32).sum();
        e8m0_to_f32_half(self.e) * act.d.to_f32() * sumi as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_is_a_power_of_two_halved() {
        assert_eq!(e8m0_to_f32_half(128), 1.0);
        assert_eq!(e8m0_to_f32_half(127), 0.5);
        assert_eq!(e8m0_to_f32_half(130), 4.0);
        assert_eq!(e8m0_to_f32_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_to_f32_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_to_f32_half(255), 2f32.powi(127));
    }

    #[test]
    fn levels_times_a_scale_round_trip() {
        let x: [f32; QK] = std::array::from_fn(|j| KVALUES_MXFP4[(j * 5) % 16] as f32 * 0.25);
        let mut y = [0f32; QK];
        let block = BlockMXFP4::quantize_block(&x);
        block.dequantize_block(&mut y);
        assert_eq!(y, x);
        assert_eq!(block.e, 126, "amax 3: ⌊log2 3⌋ − 2 + 127");
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockMXFP4::quantize_block(&[0.0; QK]);
        assert_eq!((block.e, block.qs), (0, [0; QK / 2]));
    }
}
