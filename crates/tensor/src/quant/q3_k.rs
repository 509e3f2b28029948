//! ggml's Q3_K: 256-value super-blocks of sixteen 16-value sub-blocks, 3-bit signed
//! quants (two low bits plus a high-bit mask) with a 6-bit scale per sub-block
//! (`x = d * (sc - 32) * q`, `q` in `-4..4`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::scale_search::{make_q3_quants, nearest_int};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q3_K super-block.
const QK_K: usize = 256;

/// A Q3_K super-block, byte-compatible with ggml's `block_q3_K` (110 bytes).
///
/// Value `e` has low bits `(qs[32*(e/128) + e%32] >> 2*((e%128)/32)) & 3` and high bit
/// `hmask[e%32] >> (e/32) & 1`; its quant is `low - 4` when the high bit is clear and
/// `low` when it is set. It belongs to sub-block `e/16`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ3K {
    /// High bits of the quants.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits of the quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Sixteen 6-bit scales (biased by 32): low nibbles of scales 0..8 and 8..16 in
    /// bytes 0..8 (low and high half), the top two bits of scale `j` in byte
    /// `8 + j%4` at bit `2*(j/4)`.
    pub scales: [u8; 12],
    /// Super-block scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockQ3K>() == DType::Q3K.block_bytes());

impl BlockQ3K {
    /// The scale of sub-block `j` (0..16), unbiased: `-32..32`.
    fn scale(&self, j: usize) -> i32 {
        let low = if j < 8 {
            self.scales[j] & 0xF
        } else {
            self.scales[j - 8] >> 4
        };
        let high = (self.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        (low | (high << 4)) as i32 - 32
    }

    /// Quant of value `e` (0..256), a level in `-4..4`.
    fn level(&self, e: usize) -> i32 {
        let low = (self.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        let high_set = (self.hmask[e % 32] >> (e / 32)) & 1 != 0;
        low as i32 - if high_set { 0 } else { 4 }
    }
}

impl QuantizeBlock for BlockQ3K {
    /// ggml's `quantize_row_q3_K_ref`: per sub-block a symmetric fit refined by
    /// coordinate descent, then 6-bit scales relative to the largest in magnitude.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let (subs, _) = x.as_chunks::<16>();
        let mut levels = [0u8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<16>().0).enumerate() {
            scales[j] = make_q3_quants(sub, 4, out);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }

        let mut block: Self = bytemuck::Zeroable::zeroed();
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &scale) in scales.iter().enumerate() {
                // ggml stores the rounded scale in an `int8_t` before clamping.
                let l = ((nearest_int(iscale * scale) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    block.scales[j] = l & 0xF;
                } else {
                    block.scales[j - 8] |= (l & 0xF) << 4;
                }
                block.scales[8 + j % 4] |= (l >> 4) << (2 * (j / 4));
            }
            block.d = f16::from_f32(1.0 / iscale);
        }

        // Re-quantize each sub-block against the scales as stored.
        let d_all = block.d.to_f32();
        for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<16>().0).enumerate() {
            let d = d_all * block.scale(j) as f32;
            if d == 0.0 {
                continue;
            }
            for (&v, l) in sub.iter().zip(out) {
                *l = (nearest_int(v / d).clamp(-4, 3) + 4) as u8;
            }
        }

        for (e, &l) in levels.iter().enumerate() {
            let low = if l > 3 {
                block.hmask[e % 32] |= 1 << (e / 32);
                l - 4
            } else {
                l
            };
            block.qs[32 * (e / 128) + e % 32] |= low << (2 * ((e % 128) / 32));
        }
        block
    }
}

impl QuantBlock for BlockQ3K {
    const DTYPE: DType = DType::Q3K;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK_K>(dst, Self::DTYPE);
        let d_all = self.d.to_f32();
        for (j, sub) in y.as_chunks_mut::<16>().0.iter_mut().enumerate() {
            let dl = d_all * self.scale(j) as f32;
            for (l, out) in sub.iter_mut().enumerate() {
                *out = dl * self.level(16 * j + l) as f32;
            }
        }
    }
}

impl QuantDot for BlockQ3K {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_q3_K_q8_K`: `(d * d_a) * isum`, where `isum` sums the
    /// scale-weighted integer sub-block dots.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        let isum: i32 = (0..QK_K / 16)
            .map(|j| {
                let dot: i32 = (16 * j..16 * j + 16)
                    .map(|e| act.qs[e] as i32 * self.level(e))
                    .sum();
                self.scale(j) * dot
            })
            .sum();
        self.d.to_f32() * act.d * isum as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK_K]) -> [f32; QK_K] {
        let mut y = [0f32; QK_K];
        BlockQ3K::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ3K::quantize_block(&[0.0; QK_K]);
        assert_eq!(block.d.to_f32(), 0.0);
        assert_eq!(round_trip(&[0.0; QK_K]), [0.0; QK_K]);
    }

    #[test]
    fn constant_block_is_close() {
        for c in [0.75f32, -3.0] {
            for y in round_trip(&[c; QK_K]) {
                assert!((y - c).abs() <= c.abs() * 0.01, "{c}: {y}");
            }
        }
    }

    #[test]
    fn scale_packing_round_trips() {
        let mut block: BlockQ3K = bytemuck::Zeroable::zeroed();
        let wanted: [i32; 16] = std::array::from_fn(|j| j as i32 * 4 - 32);
        for (j, &s) in wanted.iter().enumerate() {
            let l = (s + 32) as u8;
            if j < 8 {
                block.scales[j] |= l & 0xF;
            } else {
                block.scales[j - 8] |= (l & 0xF) << 4;
            }
            block.scales[8 + j % 4] |= (l >> 4) << (2 * (j / 4));
        }
        for (j, &s) in wanted.iter().enumerate() {
            assert_eq!(block.scale(j), s, "scale {j}");
        }
    }

    #[test]
    fn extremes_stay_finite() {
        let mut x = [0.01f32; QK_K];
        x[3] = 40000.0;
        x[250] = -40000.0;
        let y = round_trip(&x);
        assert!(y.iter().all(|v| v.is_finite()));
        assert!((y[3] - 40000.0).abs() < 4000.0, "{}", y[3]);
        assert!((y[250] + 40000.0).abs() < 4000.0, "{}", y[250]);
    }
}
