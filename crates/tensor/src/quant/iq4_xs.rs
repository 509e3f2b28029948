//! ggml's IQ4_XS: 256-value super-blocks of eight 32-value sub-blocks, IQ4_NL's 16
//! non-linear levels with a signed 6-bit scale per sub-block
//! (`x = d · (ls − 32) · KVALUES_IQ4NL[q]`).

use half::f16;

use super::iq_grids::KVALUES_IQ4NL;
use super::iq4_search::{SUB_BLOCK, levels, pack_nibbles, quantize_scales, sub_block_scale};
use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per IQ4_XS super-block.
const QK_K: usize = 256;
/// Sub-blocks per super-block.
const SUBS: usize = QK_K / SUB_BLOCK;

/// An IQ4_XS super-block, byte-compatible with ggml's `block_iq4_xs` (136 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockIQ4XS {
    /// Super-block scale.
    pub d: f16,
    /// High 2 bits of the eight 6-bit sub-block scales (bits `2i..2i+2` for sub-block `i`).
    pub scales_h: u16,
    /// Low 4 bits of the sub-block scales, two per byte (sub-block `2j` low nibble).
    pub scales_l: [u8; QK_K / 64],
    /// Level indices, 16 bytes per sub-block, laid out as an IQ4_NL block's.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockIQ4XS>() == DType::IQ4XS.block_bytes());

impl BlockIQ4XS {
    /// Sub-block `ib`'s signed scale `ls − 32` (-32..=31).
    pub fn sub_block_scale(&self, ib: usize) -> i32 {
        let low = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
        let high = ((self.scales_h >> (2 * ib)) & 3) as u8;
        (low | (high << 4)) as i32 - 32
    }

    /// Value `j`'s level (-127..=113).
    fn level(&self, j: usize) -> i32 {
        let (ib, i) = (j / SUB_BLOCK, j % SUB_BLOCK);
        let byte = self.qs[16 * ib + i % 16];
        let index = if i < 16 { byte & 0xF } else { byte >> 4 };
        KVALUES_IQ4NL[index as usize] as i32
    }
}

impl QuantBlock for BlockIQ4XS {
    const DTYPE: DType = DType::IQ4XS;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK_K>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (ib, out) in y.chunks_exact_mut(SUB_BLOCK).enumerate() {
            let dl = d * self.sub_block_scale(ib) as f32;
            for (i, o) in out.iter_mut().enumerate() {
                *o = dl * self.level(SUB_BLOCK * ib + i) as f32;
            }
        }
    }
}

impl QuantizeBlock for BlockIQ4XS {
    /// ggml's `quantize_iq4_xs` without an importance matrix: each sub-block's
    /// least-squares scale ([`sub_block_scale`]), the scales quantized to 6 bits against
    /// `d = −max / 32` ([`quantize_scales`]), then each value's nearest level at its
    /// sub-block's quantized scale `d · l`.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let subs: [&[f32; SUB_BLOCK]; SUBS] =
            std::array::from_fn(|ib| x[SUB_BLOCK * ib..][..SUB_BLOCK].try_into().unwrap());
        let (d, scales) = quantize_scales(&subs.map(sub_block_scale));
        let mut block = Self {
            d: f16::from_f32(d),
            scales_h: 0,
            scales_l: [0; QK_K / 64],
            qs: [0; QK_K / 2],
        };
        for (ib, (xb, l)) in subs.iter().zip(scales).enumerate() {
            let dl = d * l as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            block.qs[16 * ib..][..16].copy_from_slice(&pack_nibbles(&levels(xb, idl)));
            let stored = (l + 32) as u8;
            block.scales_l[ib / 2] |= (stored & 0xF) << (4 * (ib % 2));
            block.scales_h |= ((stored >> 4) as u16) << (2 * ib);
        }
        block
    }
}

impl QuantDot for BlockIQ4XS {
    type Activation = BlockQ8K;

    /// `(d_w · d_a) · Σ_sub (ls − 32) · Σ level · q`, one integer sum per super-block
    /// (ggml's AVX2 kernel's arithmetic; its scalar code scales each sub-block in f32).
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        let sumi: i32 = (0..SUBS)
            .map(|ib| {
                let s: i32 = (SUB_BLOCK * ib..SUB_BLOCK * (ib + 1))
                    .map(|j| self.level(j) * act.qs[j] as i32)
                    .sum();
                self.sub_block_scale(ib) * s
            })
            .sum();
        self.d.to_f32() * act.d * sumi as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_pack_as_ggml_does() {
        let mut x = [0f32; QK_K];
        for (ib, sub) in x.chunks_exact_mut(SUB_BLOCK).enumerate() {
            for (j, v) in sub.iter_mut().enumerate() {
                *v = KVALUES_IQ4NL[j % 16] as f32 * (ib as f32 + 1.0) * 0.01;
            }
        }
        let block = BlockIQ4XS::quantize_block(&x);
        // The largest sub-block scale (sub-block 7) maps to -32.
        assert_eq!(block.sub_block_scale(7), -32);
        let mut y = [0f32; QK_K];
        block.dequantize_block(&mut y);
        for (j, (a, b)) in x.iter().zip(&y).enumerate() {
            assert!((a - b).abs() <= 0.02 * a.abs() + 1e-3, "{j}: {a} vs {b}");
        }
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockIQ4XS::quantize_block(&[0.0; QK_K]);
        let mut y = [1f32; QK_K];
        block.dequantize_block(&mut y);
        assert!(y.iter().all(|&v| v == 0.0));
    }
}
