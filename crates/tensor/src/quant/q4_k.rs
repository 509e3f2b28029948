//! ggml's Q4_K: 256-value super-blocks of eight 32-value sub-blocks, 4-bit quants with a
//! 6-bit scale and a 6-bit min per sub-block (`x = d*sc * q - dmin*m`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::scale_min_k4::{K_SCALE_SIZE, fit_scale_min, scale_min};
use super::scale_search::ScaleMinSearch;
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q4_K super-block.
const QK_K: usize = 256;

/// A Q4_K super-block, byte-compatible with ggml's `block_q4_K` (144 bytes).
///
/// Value `e` belongs to sub-block `e/32`; its quant is the low nibble of
/// `qs[32*(e/64) + e%32]` for even sub-blocks and the high nibble for odd ones.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed as ggml's `get_scale_min_k4`
    /// reads them.
    pub scales: [u8; K_SCALE_SIZE],
    /// 4-bit quants, two per byte.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ4K>() == DType::Q4K.block_bytes());

impl BlockQ4K {
    /// Quant of value `e` (0..256), a level in `0..16`.
    fn level(&self, e: usize) -> i32 {
        let byte = self.qs[32 * (e / 64) + e % 32];
        (if (e / 32).is_multiple_of(2) {
            byte & 0xF
        } else {
            byte >> 4
        }) as i32
    }
}

impl QuantizeBlock for BlockQ4K {
    /// ggml's `quantize_row_q4_K_ref`.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let search = ScaleMinSearch {
            nmax: 15,
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            use_mad: false,
        };
        let fit = fit_scale_min(x, search);
        let mut qs = [0u8; QK_K / 2];
        for (e, &l) in fit.levels.iter().enumerate() {
            qs[32 * (e / 64) + e % 32] |= l << (4 * ((e / 32) % 2));
        }
        Self {
            d: fit.d,
            dmin: fit.dmin,
            scales: fit.scales,
            qs,
        }
    }
}

impl QuantBlock for BlockQ4K {
    const DTYPE: DType = DType::Q4K;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK_K>(dst, Self::DTYPE);
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (j, sub) in y.as_chunks_mut::<32>().0.iter_mut().enumerate() {
            let (sc, m) = scale_min(j, &self.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            for (l, out) in sub.iter_mut().enumerate() {
                *out = d1 * self.level(32 * j + l) as f32 - m1;
            }
        }
    }
}

impl QuantDot for BlockQ4K {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_q4_K_q8_K`: `(d*d_a) * isum - (dmin*d_a) * summs`, where
    /// `isum` sums the scale-weighted integer sub-block dots and `summs` the min-weighted
    /// activation block sums.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        let (mut isum, mut summs) = (0i32, 0i32);
        for j in 0..QK_K / 32 {
            let (sc, m) = scale_min(j, &self.scales);
            let dot: i32 = (32 * j..32 * j + 32)
                .map(|e| act.qs[e] as i32 * self.level(e))
                .sum();
            isum += sc as i32 * dot;
            summs += m as i32 * (act.bsums[2 * j] as i32 + act.bsums[2 * j + 1] as i32);
        }
        let d = self.d.to_f32() * act.d;
        let dmin = self.dmin.to_f32() * act.d;
        d * isum as f32 - dmin * summs as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: &[f32; QK_K]) -> [f32; QK_K] {
        let mut y = [0f32; QK_K];
        BlockQ4K::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ4K::quantize_block(&[0.0; QK_K]);
        assert_eq!(bytemuck::bytes_of(&block), &[0u8; 144][..]);
        assert_eq!(round_trip(&[0.0; QK_K]), [0.0; QK_K]);
    }

    #[test]
    fn constant_block_is_close() {
        for c in [1.0f32, -0.3] {
            for y in round_trip(&[c; QK_K]) {
                assert!((y - c).abs() <= c.abs() * 0.01, "{c}: {y}");
            }
        }
    }

    #[test]
    fn sixteen_level_grid_is_close() {
        let x: [f32; QK_K] = std::array::from_fn(|e| (e % 16) as f32 * 0.125 - 0.5);
        for (a, b) in x.iter().zip(&round_trip(&x)) {
            assert!((a - b).abs() < 2e-3, "{a} vs {b}");
        }
    }

    #[test]
    fn extremes_stay_finite() {
        let mut x = [0.1f32; QK_K];
        x[40] = 50000.0;
        x[41] = -50000.0;
        let y = round_trip(&x);
        assert!(y.iter().all(|v| v.is_finite()));
        assert!((y[40] - 50000.0).abs() < 3500.0, "{}", y[40]);
        assert!((y[41] + 50000.0).abs() < 3500.0, "{}", y[41]);
    }
}
