//! The scale search of the non-linear 4-bit formats (IQ4_NL, IQ4_XS), as ggml's
//! `quantize_row_iq4_nl_impl` runs it for `llama-quantize` without an importance matrix
//! (`quantize_iq4_nl` / `quantize_iq4_xs`: seven trial scales either side, value weights
//! `x²`).
//!
//! Every float operation keeps ggml's order of evaluation, so the levels and scales match
//! ggml's bit for bit on a compiler that does not fuse multiply-adds.

use super::iq_grids::KVALUES_IQ4NL;
use super::scale_search::{GROUP_MAX_EPS, nearest_int};

/// Trial inverse scales either side of the first guess (ggml's `ntry`).
const NTRY: i32 = 7;

/// Values per sub-block with its own scale.
pub(crate) const SUB_BLOCK: usize = 32;

/// The index of the level nearest `x` among the 16 ascending non-linear levels (ggml's
/// `best_index_int8`; on a tie between two levels the upper one).
pub(crate) fn best_index(x: f32) -> u8 {
    let values = &KVALUES_IQ4NL;
    if x <= values[0] as f32 {
        return 0;
    }
    if x >= values[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mid = (ml + mu) / 2;
        if x < values[mid] as f32 {
            mu = mid;
        } else {
            ml = mid;
        }
    }
    if x - (values[mu - 1] as f32) < values[mu] as f32 - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// `Σ w·q·x` and `Σ w·q²` over a sub-block for inverse scale `id` (levels by
/// [`best_index`], weights `x²`), optionally writing the chosen level indices.
fn fit(xb: &[f32; SUB_BLOCK], id: f32, mut levels: Option<&mut [u8; SUB_BLOCK]>) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for (j, &x) in xb.iter().enumerate() {
        let l = best_index(id * x);
        if let Some(levels) = levels.as_deref_mut() {
            levels[j] = l;
        }
        let q = KVALUES_IQ4NL[l as usize] as f32;
        let w = x * x;
        sumqx += w * q * x;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The least-squares scale of one 32-value sub-block: the first guess maps the value of
/// largest magnitude onto the outermost level, then fifteen trial inverse scales
/// `(k − 127) / max`, `k` in `-7..=7`, keep the one with the largest `(Σ w·q·x)² / Σ w·q²`.
/// A sub-block whose magnitudes are all below `GROUP_MAX_EPS` gets scale 0.
pub(crate) fn sub_block_scale(xb: &[f32; SUB_BLOCK]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &x in xb {
        if x.abs() > amax {
            amax = x.abs();
            max = x;
        }
    }
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let first = KVALUES_IQ4NL[0] as f32;
    let d = -max / first;
    let (sumqx, sumq2) = fit(xb, 1.0 / d, None);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        let id = (itry + KVALUES_IQ4NL[0] as i32) as f32 / max;
        let (sumqx, sumq2) = fit(xb, id, None);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// The level indices of `xb` for inverse scale `id`.
pub(crate) fn levels(xb: &[f32; SUB_BLOCK], id: f32) -> [u8; SUB_BLOCK] {
    let mut out = [0u8; SUB_BLOCK];
    fit(xb, id, Some(&mut out));
    out
}

/// Packs 32 level indices as ggml stores them: byte `j` holds value `j` in its low nibble
/// and value `j + 16` in its high nibble.
pub(crate) fn pack_nibbles(levels: &[u8; SUB_BLOCK]) -> [u8; SUB_BLOCK / 2] {
    std::array::from_fn(|j| levels[j] | (levels[j + 16] << 4))
}

/// A super-block's sub-block scale quantized as IQ4_XS does: `d = −max_scale / 32` (the
/// sub-block scale of largest magnitude maps to −32) and each scale to
/// `clamp(round(scale / d), −32, 31)`. Returns `d` and the 6-bit signed levels.
pub(crate) fn quantize_scales<const N: usize>(scales: &[f32; N]) -> (f32, [i32; N]) {
    let (mut amax, mut max_scale) = (0.0f32, 0.0f32);
    for &s in scales {
        if s.abs() > amax {
            amax = s.abs();
            max_scale = s;
        }
    }
    let d = -max_scale / 32.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, scales.map(|s| nearest_int(id * s).clamp(-32, 31)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_picks_the_nearest_level() {
        assert_eq!(best_index(-1000.0), 0);
        assert_eq!(best_index(1000.0), 15);
        assert_eq!(best_index(0.0), 8, "0 is nearer 1 than -10");
        assert_eq!(
            best_index(-4.5),
            8,
            "a tie between -10 and 1 takes the upper"
        );
        assert_eq!(best_index(-5.0), 7);
        for (i, &v) in KVALUES_IQ4NL.iter().enumerate() {
            assert_eq!(best_index(v as f32), i as u8);
        }
    }

    #[test]
    fn zero_sub_block_has_zero_scale() {
        assert_eq!(sub_block_scale(&[0.0; SUB_BLOCK]), 0.0);
        assert_eq!(sub_block_scale(&[1e-20; SUB_BLOCK]), 0.0);
    }

    #[test]
    fn scale_fits_an_exact_codebook_row() {
        // Values on the codebook times 0.01 are reproduced exactly.
        let xb: [f32; SUB_BLOCK] = std::array::from_fn(|j| KVALUES_IQ4NL[j % 16] as f32 * 0.01);
        let d = sub_block_scale(&xb);
        let l = levels(&xb, 1.0 / d);
        for j in 0..SUB_BLOCK {
            let y = d * KVALUES_IQ4NL[l[j] as usize] as f32;
            assert!((y - xb[j]).abs() < 1e-6, "{j}: {y} vs {}", xb[j]);
        }
    }
}
