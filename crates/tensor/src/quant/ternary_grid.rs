//! What IQ1_S and IQ1_M share: a 256-value super-block is 32 groups of eight values, each
//! group an entry of the 2048-entry ternary grid (values -1, 0, 1) shifted by
//! `±IQ1S_DELTA` and scaled by an odd integer `2s + 1` and the super-block's f16 scale:
//!
//! `x = d · (2s + 1) · (grid + delta)`
//!
//! as ggml's `dequantize_row_iq1_*`. The dot product with Q8_K is exact in integers up
//! to its last step: `Σ (2s + 1) · (8 · Σ grid · q ± Σ q)`, then `· (d_w · d_a) / 8`
//! (ggml's scalar code adds `IQ1S_DELTA · Σ ..` to `Σ ..` in f32, the same value while
//! the sum stays below 2^21, i.e. for every block of Q8_K quants).

use super::iq_grids::{IQ1S_DELTA, IQ1S_GRID, entry8};
use super::q8_k::BlockQ8K;

/// Groups of eight values per super-block.
const GROUPS: usize = 32;

/// A format whose super-block is [`GROUPS`] ternary grid groups (IQ1_S, IQ1_M).
pub(crate) trait TernaryGrid {
    /// The super-block scale `d`.
    fn d(&self) -> f32;

    /// Group `g`'s index into the grid, whether its delta is negative, and its odd scale
    /// `2s + 1`.
    fn group(&self, g: usize) -> (usize, bool, i32);
}

/// Group `g`'s eight grid values as signed integers.
fn values<B: TernaryGrid>(block: &B, g: usize) -> ([i8; 8], bool, i32) {
    let (index, negative, scale) = block.group(g);
    (entry8(&IQ1S_GRID, index).map(|v| v as i8), negative, scale)
}

/// Dequantizes one super-block of a [`TernaryGrid`] format into 256 values.
pub(crate) fn dequantize<B: TernaryGrid>(block: &B, y: &mut [f32; 256]) {
    let d = block.d();
    for (g, out) in y.chunks_exact_mut(8).enumerate() {
        let (grid, negative, scale) = values(block, g);
        let dl = d * scale as f32;
        let delta = if negative { -IQ1S_DELTA } else { IQ1S_DELTA };
        for (o, &v) in out.iter_mut().zip(&grid) {
            *o = dl * (v as f32 + delta);
        }
    }
}

/// One super-block's term of the dot product with Q8_K (see the module docs).
pub(crate) fn dot<B: TernaryGrid>(block: &B, act: &BlockQ8K) -> f32 {
    let sum8: i32 = (0..GROUPS)
        .map(|g| {
            let (grid, negative, scale) = values(block, g);
            let q = &act.qs[8 * g..8 * g + 8];
            let dot: i32 = grid.iter().zip(q).map(|(&v, &q)| v as i32 * q as i32).sum();
            let sum: i32 = q.iter().map(|&q| q as i32).sum();
            scale * (8 * dot + if negative { -sum } else { sum })
        })
        .sum();
    block.d() * act.d * (sum8 as f32 * 0.125)
}
