//! The scale/min structure shared by Q4_K and Q5_K: eight 32-value sub-blocks, each with
//! a 6-bit scale and a 6-bit min, packed into 12 bytes (ggml's `get_scale_min_k4`), and
//! the fitting that chooses them (the common part of `quantize_row_q4_K_ref` and
//! `quantize_row_q5_K_ref`).
//!
//! Bytes 0..4 hold scales 0..4 in their low 6 bits, bytes 4..8 mins 0..4; bytes 8..12 hold
//! the low nibbles of scales 4..8 (low half) and mins 4..8 (high half), whose top two
//! bits sit in the top bits of bytes 0..4 (scales) and 4..8 (mins).

use half::f16;

use super::scale_search::{ScaleMinSearch, make_qkx2_quants, nearest_int};

/// Size of the packed scales and mins in bytes (ggml's `K_SCALE_SIZE`).
pub const K_SCALE_SIZE: usize = 12;

/// Scale and min of sub-block `j` (0..8), each 0..64.
pub fn scale_min(j: usize, packed: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        (
            (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4),
            (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
        )
    }
}

/// Packs eight scales and eight mins (each 0..64) the way `scale_min` reads them.
pub fn pack_scale_min(scales: &[u8; 8], mins: &[u8; 8]) -> [u8; K_SCALE_SIZE] {
    let mut packed = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        let (ls, lm) = (scales[j], mins[j]);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    packed
}

/// What [`fit_scale_min`] chose for one 256-value super-block.
pub(crate) struct ScaleMinFit {
    /// Super-block scale of the sub-block scales.
    pub(crate) d: f16,
    /// Super-block scale of the sub-block mins.
    pub(crate) dmin: f16,
    /// The packed 6-bit scales and mins.
    pub(crate) scales: [u8; K_SCALE_SIZE],
    /// The level (`0..=search.nmax`) of each value.
    pub(crate) levels: [u8; 256],
}

/// Fits a Q4_K/Q5_K super-block: per 32-value sub-block an affine fit weighted by
/// `rms(sub-block) + |x|` ([`make_qkx2_quants`] with `search`), scales and mins quantized
/// to 6 bits relative to the largest of each, then every value re-quantized against the
/// scales as stored.
pub(crate) fn fit_scale_min(x: &[f32; 256], search: ScaleMinSearch) -> ScaleMinFit {
    let (subs, _) = x.as_chunks::<32>();
    let mut levels = [0u8; 256];
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<32>().0).enumerate() {
        let sum_x2 = sub.iter().fold(0.0f32, |sum, v| sum + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights = sub.map(|v| av_x + v.abs());
        (scales[j], mins[j]) = make_qkx2_quants(sub, &weights, search, out);
        max_scale = if scales[j] > max_scale {
            scales[j]
        } else {
            max_scale
        };
        max_min = if mins[j] > max_min { mins[j] } else { max_min };
    }

    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // ggml stores the rounded values in a `uint8_t` before clamping to 63.
    let quantized = |inv: f32, v: f32| (nearest_int(inv * v) as u8).min(63);
    let packed = pack_scale_min(
        &scales.map(|s| quantized(inv_scale, s)),
        &mins.map(|m| quantized(inv_min, m)),
    );
    let (d, dmin) = (
        f16::from_f32(max_scale / 63.0),
        f16::from_f32(max_min / 63.0),
    );

    let nmax = search.nmax;
    for (j, (sub, out)) in subs.iter().zip(levels.as_chunks_mut::<32>().0).enumerate() {
        let (sc, m) = scale_min(j, &packed);
        let d = d.to_f32() * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for (&v, l) in sub.iter().zip(out) {
            *l = nearest_int((v + dm) / d).clamp(0, nmax) as u8;
        }
    }
    ScaleMinFit {
        d,
        dmin,
        scales: packed,
        levels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_then_unpack_round_trips() {
        let scales: [u8; 8] = [0, 1, 17, 63, 32, 15, 48, 63];
        let mins: [u8; 8] = [63, 2, 33, 0, 31, 63, 16, 1];
        let packed = pack_scale_min(&scales, &mins);
        for j in 0..8 {
            assert_eq!(scale_min(j, &packed), (scales[j], mins[j]), "sub-block {j}");
        }
    }
}
