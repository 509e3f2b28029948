//! ggml's Q6_K: 256-value super-blocks of sixteen 16-value sub-blocks, 6-bit signed
//! quants (four low bits plus two high bits) with a signed 8-bit scale per sub-block
//! (`x = d * sc * (q - 32)`).

use half::f16;

use super::q8_k::BlockQ8K;
use super::quant_block::{QuantBlock, QuantizeBlock, block_values, block_values_mut};
use super::scale_search::{GROUP_MAX_EPS, make_qx_quants, nearest_int};
use super::vec_dot::QuantDot;
use crate::dtype::DType;

/// Values per Q6_K super-block.
const QK_K: usize = 256;

/// A Q6_K super-block, byte-compatible with ggml's `block_q6_K` (210 bytes).
///
/// Value `e`, with `n = e/128`, `k = (e%128)/32`, `l = e%32`: its low four bits are in
/// `ql[64*n + 32*(k%2) + l]` (low nibble for `k < 2`, high nibble otherwise), its high two
/// bits are bits `2k..2k+2` of `qh[32*n + l]`. It belongs to sub-block `e/16`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ6K {
    /// Low four bits of the quants, two per byte.
    pub ql: [u8; QK_K / 2],
    /// High two bits of the quants, four per byte.
    pub qh: [u8; QK_K / 4],
    /// Per sub-block scale.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockQ6K>() == DType::Q6K.block_bytes());

/// Where value `e`'s bits live: (`ql` index, `ql` shift, `qh` index, `qh` shift).
fn bit_positions(e: usize) -> (usize, u32, usize, u32) {
    let (n, k, l) = (e / 128, (e % 128) / 32, e % 32);
    (
        64 * n + 32 * (k % 2) + l,
        4 * (k / 2) as u32,
        32 * n + l,
        2 * k as u32,
    )
}

impl BlockQ6K {
    /// Quant of value `e` (0..256), a level in `-32..32`.
    fn level(&self, e: usize) -> i32 {
        let (ql_at, ql_shift, qh_at, qh_shift) = bit_positions(e);
        let low = (self.ql[ql_at] >> ql_shift) & 0xF;
        let high = (self.qh[qh_at] >> qh_shift) & 3;
        (low | (high << 4)) as i32 - 32
    }
}

impl QuantizeBlock for BlockQ6K {
    /// ggml's `quantize_row_q6_K_ref`: per sub-block a symmetric weighted least-squares
    /// fit, then 8-bit scales relative to the largest in magnitude.
    fn quantize_block(src: &[f32]) -> Self {
        let x = block_values::<QK_K>(src, Self::DTYPE);
        let (subs, _) = x.as_chunks::<16>();
        let mut levels = [0u8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<16>().0).enumerate() {
            scales[j] = make_qx_quants(sub, 32, out);
            if scales[j].abs() > max_abs_scale {
                max_abs_scale = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut block: Self = bytemuck::Zeroable::zeroed();
        if max_abs_scale < GROUP_MAX_EPS {
            return block;
        }

        let iscale = -128.0 / max_scale;
        block.d = f16::from_f32(1.0 / iscale);
        for (packed, &scale) in block.scales.iter_mut().zip(&scales) {
            // ggml stores `MIN(127, nearest_int(..))` in an `int8_t`.
            *packed = nearest_int(iscale * scale).min(127) as i8;
        }

        // Re-quantize each sub-block against the scales as stored.
        let d_all = block.d.to_f32();
        for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<16>().0).enumerate() {
            let d = d_all * block.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for (&v, l) in sub.iter().zip(out) {
                *l = (nearest_int(v / d).clamp(-32, 31) + 32) as u8;
            }
        }

        for (e, &l) in levels.iter().enumerate() {
            let (ql_at, ql_shift, qh_at, qh_shift) = bit_positions(e);
            block.ql[ql_at] |= (l & 0xF) << ql_shift;
            block.qh[qh_at] |= (l >> 4) << qh_shift;
        }
        block
    }
}

impl QuantBlock for BlockQ6K {
    const DTYPE: DType = DType::Q6K;

    fn dequantize_block(&self, dst: &mut [f32]) {
        let y = block_values_mut::<QK_K>(dst, Self::DTYPE);
        let d = self.d.to_f32();
        for (j, sub) in y.as_chunks_mut::<16>().0.iter_mut().enumerate() {
            let dl = d * self.scales[j] as f32;
            for (l, out) in sub.iter_mut().enumerate() {
                *out = dl * self.level(16 * j + l) as f32;
            }
        }
    }
}

impl QuantDot for BlockQ6K {
    type Activation = BlockQ8K;

    /// ggml's `ggml_vec_dot_q6_K_q8_K`: `(d * d_a) * isum`, where `isum` sums the
    /// scale-weighted integer sub-block dots.
    fn dot_block(&self, act: &BlockQ8K) -> f32 {
        let isum: i32 = (0..QK_K / 16)
            .map(|j| {
                let dot: i32 = (16 * j..16 * j + 16)
                    .map(|e| act.qs[e] as i32 * self.level(e))
                    .sum();
                self.scales[j] as i32 * dot
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
        BlockQ6K::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn zeros_give_an_all_zero_block() {
        let block = BlockQ6K::quantize_block(&[0.0; QK_K]);
        assert_eq!(bytemuck::bytes_of(&block), &[0u8; 210][..]);
        // An all-zero block dequantizes to zeros: level -32 times scale 0.
        assert_eq!(round_trip(&[0.0; QK_K]), [0.0; QK_K]);
    }

    #[test]
    fn constant_block_is_close() {
        for c in [0.5f32, -7.0] {
            for y in round_trip(&[c; QK_K]) {
                assert!((y - c).abs() <= c.abs() * 0.005, "{c}: {y}");
            }
        }
    }

    #[test]
    fn bit_positions_cover_every_bit_once() {
        let (mut ql, mut qh) = ([0u8; QK_K / 2], [0u8; QK_K / 4]);
        for e in 0..QK_K {
            let (ql_at, ql_shift, qh_at, qh_shift) = bit_positions(e);
            assert_eq!(ql[ql_at] & (0xF << ql_shift), 0);
            assert_eq!(qh[qh_at] & (3 << qh_shift), 0);
            ql[ql_at] |= 0xF << ql_shift;
            qh[qh_at] |= 3 << qh_shift;
        }
        assert_eq!((ql, qh), ([0xFF; QK_K / 2], [0xFF; QK_K / 4]));
    }

    #[test]
    fn extremes_stay_finite() {
        let mut x = [0.2f32; QK_K];
        x[100] = -60000.0;
        x[101] = 60000.0;
        let y = round_trip(&x);
        assert!(y.iter().all(|v| v.is_finite()));
        assert!((y[100] + 60000.0).abs() < 1000.0, "{}", y[100]);
        assert!((y[101] - 60000.0).abs() < 2000.0, "{}", y[101]);
    }
}
