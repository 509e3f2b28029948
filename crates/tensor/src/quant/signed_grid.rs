//! What the IQ2 and IQ3 formats share: a 256-value super-block is 32 groups of eight
//! values, each group eight unsigned grid magnitudes with eight stored signs, each group
//! scaled by an odd integer `2s + 1` (per 16 or 32 values) and the super-block's f16
//! scale over a power of two:
//!
//! `x = d · (2s + 1) / 2^SHIFT · magnitude · sign`
//!
//! which is ggml's `d · (0.5 + s) · 0.25` (IQ2, SHIFT 3), `d · (0.5 + s) · 0.5`
//! (IQ3_XXS, SHIFT 2) and `d · (1 + 2s)` (IQ3_S, SHIFT 0) bit for bit: the factors are
//! powers of two, which commute with f32 rounding. The dot product with Q8_K sums
//! `(2s + 1) · Σ magnitude · sign · q` in integers per super-block, scales it once by
//! `d_w · d_a` and then by `2^-SHIFT`, as ggml's scalar code does per row (the same
//! value: a power-of-two factor is exact).

use super::q8_k::BlockQ8K;

/// Groups of eight values per super-block.
pub(crate) const GROUPS: usize = 32;

/// A format whose super-block is [`GROUPS`] signed grid groups (IQ2_XXS, IQ2_XS, IQ2_S,
/// IQ3_XXS, IQ3_S).
pub(crate) trait SignedGrid {
    /// The scale factor's power of two: `x = d · (2s + 1) · 2^-SHIFT · ..`.
    const SHIFT: i32;

    /// The super-block scale `d`.
    fn d(&self) -> f32;

    /// Group `g`'s eight magnitudes, its sign bits (bit `j` set: value `j` is negative)
    /// and its odd scale `2s + 1`.
    fn group(&self, g: usize) -> ([u8; 8], u8, i32);
}

/// The little-endian word at `bytes[at..at + 4]`.
pub(crate) fn le_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// `2^-SHIFT` as an f32.
fn pow2_neg(shift: i32) -> f32 {
    1.0 / (1u32 << shift) as f32
}

/// Dequantizes one super-block of a [`SignedGrid`] format into 256 values.
pub(crate) fn dequantize<B: SignedGrid>(block: &B, y: &mut [f32; 256]) {
    let d = block.d();
    for (g, out) in y.chunks_exact_mut(8).enumerate() {
        let (magnitudes, signs, scale) = block.group(g);
        let db = d * scale as f32 * pow2_neg(B::SHIFT);
        for (j, (o, &m)) in out.iter_mut().zip(&magnitudes).enumerate() {
            let sign = if signs & (1 << j) != 0 { -1.0 } else { 1.0 };
            *o = db * m as f32 * sign;
        }
    }
}

/// The exact integer sum `Σ_groups (2s + 1) · Σ magnitude · sign · q` of one super-block
/// against a Q8_K block's quants.
pub(crate) fn integer_dot<B: SignedGrid>(block: &B, act: &BlockQ8K) -> i32 {
    (0..GROUPS)
        .map(|g| {
            let (magnitudes, signs, scale) = block.group(g);
            let sum: i32 = (0..8)
                .map(|j| {
                    let v = magnitudes[j] as i32 * act.qs[8 * g + j] as i32;
                    if signs & (1 << j) != 0 { -v } else { v }
                })
                .sum();
            scale * sum
        })
        .sum()
}

/// One super-block's term of the dot product with Q8_K: `(d_w · d_a) · sumi · 2^-SHIFT`.
pub(crate) fn dot<B: SignedGrid>(block: &B, act: &BlockQ8K) -> f32 {
    block.d() * act.d * integer_dot(block, act) as f32 * pow2_neg(B::SHIFT)
}
