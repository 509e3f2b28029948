//! The scalar reference quantized dot product: a row of quantized weights against an
//! activation row quantized to the weight format's partner (ggml's `vec_dot_type`).
//!
//! This is the specification the SIMD CPU backend's kernels are tested against. Each
//! block contributes one f32 term computed from exact integer sums, as in ggml's scalar
//! `ggml_vec_dot_*_q8_*_generic`; the terms are added in block order.

use super::quant_block::{QuantBlock, blocks_in_bytes};
use crate::dtype::DType;
use crate::error::{Result, TensorError};

/// A weight block format with a quantized dot product against its activation format.
pub trait QuantDot: QuantBlock {
    /// The block format activations are quantized to for this weight format
    /// (`vec_dot_dtype(Self::DTYPE)`); it has the same block length.
    type Activation: QuantBlock;

    /// The dot product of this block's values with `act`'s, from integer sums scaled
    /// once per block as ggml's scalar code does.
    fn dot_block(&self, act: &Self::Activation) -> f32;

    /// The dot product of a weight row with an activation row of as many blocks: the sum
    /// of [`QuantDot::dot_block`] over the blocks, in order.
    fn vec_dot_row(w: &[Self], act: &[Self::Activation]) -> Result<f32> {
        if w.len() != act.len() {
            return Err(TensorError::Argument {
                op: "QuantDot::vec_dot_row",
                name: "act",
                reason: format!(
                    "holds {} {} blocks, but the {} weights have {}",
                    act.len(),
                    Self::Activation::DTYPE,
                    Self::DTYPE,
                    w.len()
                ),
            });
        }
        Ok(w.iter()
            .zip(act)
            .fold(0.0f32, |sum, (w, a)| sum + w.dot_block(a)))
    }
}

/// The dtype activations are quantized to before a dot product with `w`-typed weights,
/// as ggml's `vec_dot_type`: Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 → Q8_0; Q4_1, Q5_1 → Q8_1; the
/// K-quants, the other I-quants and the ternary formats → Q8_K.
///
/// The activation formats pair with themselves (Q8_1 → Q8_1, Q8_K → Q8_K), and so do the
/// plain dtypes (F32 → F32, ...), for which no quantized dot product exists.
pub fn vec_dot_dtype(w: DType) -> DType {
    match w {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 | DType::IQ4NL | DType::MXFP4 => DType::Q8_0,
        DType::Q4_1 | DType::Q5_1 | DType::Q8_1 => DType::Q8_1,
        DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K | DType::Q8K => DType::Q8K,
        DType::IQ2XXS | DType::IQ2XS | DType::IQ2S | DType::IQ3XXS | DType::IQ3S => DType::Q8K,
        DType::IQ1S | DType::IQ1M | DType::IQ4XS | DType::TQ1_0 | DType::TQ2_0 => DType::Q8K,
        plain => plain,
    }
}

/// The dot product of the weight row `w` (bytes of `w_dtype` blocks) with the activation
/// row `act`: the same number of values quantized to [`vec_dot_dtype`]`(w_dtype)`. Both
/// byte slices may have any alignment.
///
/// Errors: [`TensorError::DType`] for a `w_dtype` that is not a block format,
/// [`TensorError::Argument`] when `w` is not whole blocks or `act` has the wrong length.
pub fn vec_dot(w_dtype: DType, w: &[u8], act: &[u8]) -> Result<f32> {
    super::dispatch_block!(w_dtype, "vec_dot", vec_dot_bytes(w, act))
}

fn vec_dot_bytes<W: QuantDot>(w: &[u8], act: &[u8]) -> Result<f32> {
    const OP: &str = "vec_dot";
    let act_dtype = W::Activation::DTYPE;
    let blocks = blocks_in_bytes(OP, "w", W::DTYPE, w.len())?;
    let expected = blocks * size_of::<W::Activation>();
    if act.len() != expected {
        return Err(TensorError::Argument {
            op: OP,
            name: "act",
            reason: format!(
                "holds {} bytes, but {} {} weights need {expected} bytes of {act_dtype}",
                act.len(),
                blocks * W::DTYPE.block_len(),
                W::DTYPE
            ),
        });
    }
    let mut sum = 0.0f32;
    for (w_bytes, act_bytes) in w
        .chunks_exact(size_of::<W>())
        .zip(act.chunks_exact(size_of::<W::Activation>()))
    {
        let w_block: W = bytemuck::pod_read_unaligned(w_bytes);
        let act_block: W::Activation = bytemuck::pod_read_unaligned(act_bytes);
        sum += w_block.dot_block(&act_block);
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, has_quantizer, quantize_row, random_blocks};

    /// Every block format (each has a dot product).
    fn weight_dtypes() -> impl Iterator<Item = DType> {
        DType::ALL.into_iter().filter(|d| d.is_quantized())
    }

    /// `values` quantized to `dtype`, or random blocks of it for the formats without a
    /// quantizer.
    fn quantized(dtype: DType, values: &[f32]) -> Vec<u8> {
        if !has_quantizer(dtype) {
            return random_blocks(dtype, values.len() / dtype.block_len(), 1.0, 3).unwrap();
        }
        let mut bytes = vec![0u8; dtype.bytes_for(values.len()).unwrap()];
        quantize_row(dtype, values, &mut bytes).unwrap();
        bytes
    }

    #[test]
    fn vec_dot_dtypes_match_ggml() {
        assert_eq!(vec_dot_dtype(DType::Q4_0), DType::Q8_0);
        assert_eq!(vec_dot_dtype(DType::Q5_1), DType::Q8_1);
        assert_eq!(vec_dot_dtype(DType::Q6K), DType::Q8K);
        assert_eq!(vec_dot_dtype(DType::F32), DType::F32);
        for dtype in weight_dtypes() {
            assert_eq!(vec_dot_dtype(dtype).block_len(), dtype.block_len());
        }
    }

    /// The integer dot product equals the f32 dot of the two dequantized rows up to f32
    /// rounding: it is the same sum, grouped differently.
    #[test]
    fn vec_dot_equals_dot_of_dequantized_rows() {
        let n = 512;
        let w: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.1)
            .collect();
        let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.21).cos() * 2.0).collect();
        for dtype in weight_dtypes() {
            let act_dtype = vec_dot_dtype(dtype);
            let (wq, aq) = (quantized(dtype, &w), quantized(act_dtype, &a));
            let (mut wd, mut ad) = (vec![0f32; n], vec![0f32; n]);
            dequantize_row(dtype, &wq, &mut wd).unwrap();
            dequantize_row(act_dtype, &aq, &mut ad).unwrap();
            let expected: f64 = wd.iter().zip(&ad).map(|(x, y)| *x as f64 * *y as f64).sum();
            let got = vec_dot(dtype, &wq, &aq).unwrap() as f64;
            let scale: f64 = wd
                .iter()
                .zip(&ad)
                .map(|(x, y)| (*x as f64 * *y as f64).abs())
                .sum();
            // Q8_1's stored sum `s` is an f16, so Q4_1/Q5_1 differ by its rounding.
            let tolerance = if act_dtype == DType::Q8_1 { 2e-3 } else { 1e-5 };
            assert!(
                (got - expected).abs() <= tolerance * scale,
                "{dtype}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn vec_dot_rejects_bad_inputs() {
        let w = quantized(DType::Q4_0, &[0.5; 64]);
        let act = quantized(DType::Q8_0, &[0.5; 64]);
        assert!(vec_dot(DType::Q4_0, &w, &act).is_ok());
        assert!(matches!(
            vec_dot(DType::F32, &w, &act),
            Err(TensorError::DType { .. })
        ));
        assert!(vec_dot(DType::Q4_0, &w[..w.len() - 1], &act).is_err());
        assert!(vec_dot(DType::Q4_0, &w, &act[..act.len() - 34]).is_err());
        assert!(vec_dot(DType::Q4_1, &w[..20], &act[..34]).is_err());
        assert_eq!(vec_dot(DType::Q4_0, &[], &[]).unwrap(), 0.0);
    }
}
