//! ggml's Q5_K: 256-value super-blocks of eight 32-value sub-blocks, 5-bit quants (four
//! low bits plus a high-bit mask) with a 6-bit scale and a 6-bit min per sub-block
//! (`x = d*sc * q - dmin*m`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::scale_min_k4::{K_SCALE_SIZE, fit_scale_min, scale_min};
use super::scale_search::ScaleMinSearch;
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q5_K super-block.
const QK_K: usize = 256;

/// A Q5_K super-block, byte-compatible with ggml's `block_q5_K` (176 bytes).
///
/// Value `e` belongs to sub-block `e/32`; its low four bits are the low nibble of
/// `qs[32*(e/64) + e%32]` for even sub-blocks and the high nibble for odd ones, its fifth
/// bit is bit `e/32` of `qh[e%32]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, packed as ggml's `get_scale_min_k4`
    /// reads them.
    pub scales: [u8; K_SCALE_SIZE],
    /// Fifth bits of the quants.
    pub qh: [u8; QK_K / 8],
    /// Low four bits of the quants, two per byte.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ5K>() == DType::Q5K.block_bytes());

impl BlockQ5K {
    /// Quant of value `e` (0..256), a level in `0..32`.
    fn level(&self, e: usize) -> i32 {
        let byte = self.qs[32 * (e / 64) + e % 32];
        let low = if (e / 32).is_multiple_of(2) {
            byte & 0xF
        } else {
            byte >> 4
        };
        let high = (self.qh[e % 32] >> (e / 32)) & 1;
        (low | (high << 4)) as i32
    }
}

impl QuantizeBlock for BlockQ5K {
    /// ggml's `quantize_row_q5_K_ref`.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let search = ScaleMinSearch {
            nmax: 31,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: false,
        };
        let fit = fit_scale_min(x, search);
        let (mut qs, mut qh) = ([0u8; QK_K / 2], [0u8; QK_K / 8]);
        for (e, &l) in fit.levels.iter().enumerate() {
            qs[32 * (e / 64) + e % 32] |= (l & 0xF) << (4 * ((e / 32) % 2));
            qh[e % 32] |= (l >> 4) << (e / 32);
        }
        Self {
            d: fit.d,
            dmin: fit.dmin,
            scales: fit.scales,
            qh,
            qs,
        }
    }
}

impl QuantBlock for BlockQ5K {
    const DTYPE: DType = DType::Q5K;

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

impl QuantDot for BlockQ5K {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_q5_K_q8_K`: `(d*d_a) * isum - (dmin*d_a) * summs`, as Q4_K.
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
        BlockQ5K::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_stay_zero() {
        let block = BlockQ5K::quantize_block(&[0.0; QK_K]);
        assert_eq!(bytemuck::bytes_of(&block), &[0u8; 176][..]);
        assert_eq!(round_trip(&[0.0; QK_K]), [0.0; QK_K]);
    }

    #[test]
    fn constant_block_is_close() {
        for c in [4.0f32, -0.02] {
            for y in round_trip(&[c; QK_K]) {
                assert!((y - c).abs() <= c.abs() * 0.01, "{c}: {y}");
            }
        }
    }

    #[test]
    fn thirty_two_level_grid_is_close() {
        let x: [f32; QK_K] = std::array::from_fn(|e| (e % 32) as f32 * 0.0625 - 1.0);
        for (a, b) in x.iter().zip(&round_trip(&x)) {
            assert!((a - b).abs() < 2e-3, "{a} vs {b}");
        }
    }

    #[test]
    fn extremes_stay_finite() {
        let mut x = [-0.1f32; QK_K];
        x[255] = 50000.0;
        x[0] = -50000.0;
        let y = round_trip(&x);
        assert!(y.iter().all(|v| v.is_finite()));
        assert!((y[255] - 50000.0).abs() < 2000.0, "{}", y[255]);
        assert!((y[0] + 50000.0).abs() < 2000.0, "{}", y[0]);
    }
}
