//! What TQ1_0 and TQ2_0 share: 256 ternary values `d · t`, `t` in -1, 0, 1 (TQ2_0's
//! unused code reads as 2), quantized by ggml's reference as `t = round(x / amax)` (half
//! away from zero) and dotted with Q8_K as `Σ t · q` scaled by `d_w · d_a`.

use super::q8_k::BlockQ8K;

/// Values per super-block.
pub(crate) const QK_K: usize = 256;

/// A ternary format's super-block.
pub(crate) trait Ternary {
    /// The scale `d`.
    fn d(&self) -> f32;
    /// Value `i`'s digit `t`.
    fn value(&self, i: usize) -> i32;
}

/// Dequantizes one super-block: `t · d`.
pub(crate) fn dequantize<B: Ternary>(block: &B, y: &mut [f32; QK_K]) {
    let d = block.d();
    for (i, out) in y.iter_mut().enumerate() {
        *out = block.value(i) as f32 * d;
    }
}

/// ggml's scale of a super-block, its largest magnitude (`MAX(amax, |x|)`, so a NaN is
/// passed over), and its inverse (0 for an all-zero block).
pub(crate) fn scale(x: &[f32; QK_K]) -> (f32, f32) {
    let d = x
        .iter()
        .fold(0.0f32, |m, &v| if m > v.abs() { m } else { v.abs() });
    (d, if d != 0.0 { 1.0 / d } else { 0.0 })
}

/// The stored digit `round(x · id) + 1` (0, 1 or 2 for finite inputs).
pub(crate) fn digit(x: f32, id: f32) -> i32 {
    (x * id).round() as i32 + 1
}

/// One super-block's term of the dot product with Q8_K.
pub(crate) fn dot<B: Ternary>(block: &B, act: &BlockQ8K) -> f32 {
    let sum: i32 = (0..QK_K).map(|i| block.value(i) * act.qs[i] as i32).sum();
    sum as f32 * (block.d() * act.d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{BlockTQ1_0, BlockTQ2_0, QuantizeBlock};

    fn round_trip<B: QuantizeBlock>(x: &[f32; QK_K]) -> [f32; QK_K] {
        let mut y = [0f32; QK_K];
        B::quantize_block(x).dequantize_block(&mut y);
        y
    }

    #[test]
    fn ternary_patterns_round_trip() {
        let x: [f32; QK_K] = std::array::from_fn(|i| ((i * 7 + i / 3) % 3) as f32 * 0.5 - 0.5);
        assert_eq!(round_trip::<BlockTQ1_0>(&x), x);
        assert_eq!(round_trip::<BlockTQ2_0>(&x), x);
        assert_eq!(round_trip::<BlockTQ1_0>(&[0.0; QK_K]), [0.0; QK_K]);
    }
}
