//! ggml's Q2_K: 256-value super-blocks of sixteen 16-value sub-blocks, 2-bit quants with
//! a 4-bit scale and a 4-bit min per sub-block (`x = d*sc * q - dmin*m`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::scale_search::{ScaleMinSearch, make_qkx2_quants, nearest_int};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q2_K super-block.
const QK_K: usize = 256;

/// Largest quantized scale or min (4 bits).
const Q4SCALE: f32 = 15.0;

/// A Q2_K super-block, byte-compatible with ggml's `block_q2_K` (84 bytes).
///
/// Value `e` has quant `(qs[32*(e/128) + e%32] >> 2*((e%128)/32)) & 3` and belongs to
/// sub-block `e/16`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ2K {
    /// Per sub-block: scale in the low nibble, min in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
}

const _: () = assert!(size_of::<BlockQ2K>() == DType::Q2K.block_bytes());

impl BlockQ2K {
    /// Quant of value `e` (0..256), a level in `0..4`.
    fn level(&self, e: usize) -> i32 {
        ((self.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) as i32
    }
}

impl QuantizeBlock for BlockQ2K {
    /// ggml's `quantize_row_q2_K_ref`: per sub-block an affine fit weighted by `|x|`
    /// minimising the absolute error, then 4-bit scales and mins relative to the largest.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let (subs, _) = x.as_chunks::<16>();
        let mut levels = [0u8; QK_K];
        let (mut scales, mut mins) = ([0f32; QK_K / 16], [0f32; QK_K / 16]);
        let search = ScaleMinSearch {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<16>().0).enumerate() {
            let weights = sub.map(f32::abs);
            (scales[j], mins[j]) = make_qkx2_quants(sub, &weights, search, out);
            max_scale = if scales[j] > max_scale {
                scales[j]
            } else {
                max_scale
            };
            max_min = if mins[j] > max_min { mins[j] } else { max_min };
        }

        let mut block: Self = bytemuck::Zeroable::zeroed();
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (packed, &scale) in block.scales.iter_mut().zip(&scales) {
                *packed = nearest_int(iscale * scale) as u8;
            }
            block.d = f16::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (packed, &min) in block.scales.iter_mut().zip(&mins) {
                *packed |= (nearest_int(iscale * min) as u8) << 4;
            }
            block.dmin = f16::from_f32(max_min / Q4SCALE);
        }

        // Re-quantize each sub-block against the scales as stored.
        let (d_all, dmin_all) = (block.d.to_f32(), block.dmin.to_f32());
        for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<16>().0).enumerate() {
            let d = d_all * (block.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = dmin_all * (block.scales[j] >> 4) as f32;
            for (&v, l) in sub.iter().zip(out) {
                *l = nearest_int((v + dm) / d).clamp(0, 3) as u8;
            }
        }

        for (e, &l) in levels.iter().enumerate() {
            block.qs[32 * (e / 128) + e % 32] |= l << (2 * ((e % 128) / 32));
        }
        block
    }
}

impl QuantBlock for BlockQ2K {
    const DTYPE: DType = DType::Q2K;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK_K>(dst, Self::DTYPE);
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (j, sub) in y.as_chunks_mut::<16>().0.iter_mut().enumerate() {
            let sc = self.scales[j];
            let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
            for (l, out) in sub.iter_mut().enumerate() {
                *out = dl * self.level(16 * j + l) as f32 - ml;
            }
        }
    }
}

impl QuantDot for BlockQ2K {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_q2_K_q8_K`: `(d_a*d) * isum - (d_a*dmin) * summs`, where
    /// `isum` sums scale-weighted integer sub-block dots and `summs` the min-weighted
    /// activation block sums.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        let summs: i32 = (0..QK_K / 16)
            .map(|j| act.bsums[j] as i32 * (self.scales[j] >> 4) as i32)
            .sum();
        let isum: i32 = (0..QK_K / 16)
            .map(|j| {
                let dot: i32 = (16 * j..16 * j + 16)
                    .map(|e| act.qs[e] as i32 * self.level(e))
                    .sum();
                (self.scales[j] & 0xF) as i32 * dot
            })
            .sum();
        let dall = act.d * self.d.to_f32();
        let dmin = act.d * self.dmin.to_f32();
        dall * isum as f32 - dmin * summs as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK_K]) -> [f32; QK_K] {
        let mut y = [0f32; QK_K];
        BlockQ2K::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ2K::quantize_block(&[0.0; QK_K]);
        assert_eq!(bytemuck::bytes_of(&block), &[0u8; 84][..]);
        assert_eq!(round_trip(&[0.0; QK_K]), [0.0; QK_K]);
    }

    #[test]
    fn constant_block_is_close() {
        for c in [2.0f32, -1.5] {
            for y in round_trip(&[c; QK_K]) {
                assert!((y - c).abs() <= c.abs() * 0.01, "{c}: {y}");
            }
        }
    }

    #[test]
    fn four_level_grid_is_exact() {
        let x: [f32; QK_K] = std::array::from_fn(|e| (e % 4) as f32 * 0.5);
        let y = round_trip(&x);
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() < 1e-3, "{a} vs {b}");
        }
    }

    #[test]
    fn extremes_stay_finite() {
        let mut x = [0.5f32; QK_K];
        x[17] = -30000.0;
        x[200] = 30000.0;
        let y = round_trip(&x);
        assert!(y.iter().all(|v| v.is_finite()));
        assert!((y[200] - 30000.0).abs() < 3000.0);
        assert!((y[17] + 30000.0).abs() < 3000.0);
    }
}
