//! The [`QuantBlock`] trait: one ggml block format with its scalar reference
//! dequantizer; [`QuantizeBlock`]: the formats that also have ggml's reference quantizer;
//! plus the length checks shared by the row functions.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::Shape;

/// One block of a ggml/GGUF block-quantized format: `DTYPE.block_len()` values stored in
/// `size_of::<Self>() == DTYPE.block_bytes()` bytes, laid out exactly as ggml's
/// `block_*` struct, with the scalar reference dequantizer.
///
/// The block function is the scalar reference algorithm; the row function checks lengths
/// and returns an error instead of panicking.
pub trait QuantBlock: bytemuck::Pod {
    /// The dtype whose storage unit this block is.
    const DTYPE: DType;

    /// Dequantizes this block into exactly `Self::DTYPE.block_len()` values, bit-exact
    /// with ggml's `dequantize_row_*`.
    ///
    /// # Panics
    ///
    /// If `dst.len() != Self::DTYPE.block_len()`; use [`QuantBlock::dequantize_row`] (or
    /// [`crate::quant::dequantize_row`]) for checked lengths.
    fn dequantize_block(&self, dst: &mut [f32]);

    /// Dequantizes the blocks in `src` into `dst`, which must hold exactly
    /// `src.len() * block_len()` values.
    fn dequantize_row(src: &[Self], dst: &mut [f32]) -> Result<()> {
        const OP: &str = "QuantBlock::dequantize_row";
        check_value_count(OP, Self::DTYPE, src.len(), dst.len())?;
        for (block, values) in src
            .iter()
            .zip(dst.chunks_exact_mut(Self::DTYPE.block_len()))
        {
            block.dequantize_block(values);
        }
        Ok(())
    }
}

/// A block format with a quantizer that needs no importance matrix: every format except
/// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (the first four and the IQ1
/// types need one in llama.cpp; tempra does not implement ggml's grid searches for the
/// IQ2_S/IQ3 types).
pub trait QuantizeBlock: QuantBlock {
    /// Quantizes exactly `Self::DTYPE.block_len()` values with the algorithm
    /// `llama-quantize` uses without an importance matrix (`ggml_quantize_chunk`: ggml's
    /// `quantize_row_*_ref` for the legacy, K and ternary formats, `quantize_iq4_nl` and
    /// `quantize_iq4_xs` for the IQ4 formats).
    ///
    /// # Panics
    ///
    /// If `src.len() != Self::DTYPE.block_len()`; use [`QuantizeBlock::quantize_row`] (or
    /// [`crate::quant::quantize_row`]) for checked lengths.
    fn quantize_block(src: &[f32]) -> Self;

    /// Quantizes `src` into `dst`, one block per `block_len()` values.
    ///
    /// Errors when `src.len()` is not a multiple of the block length or `dst` does not
    /// hold exactly `src.len() / block_len()` blocks.
    fn quantize_row(src: &[f32], dst: &mut [Self]) -> Result<()> {
        const OP: &str = "QuantizeBlock::quantize_row";
        let blocks = blocks_in_values(OP, Self::DTYPE, src.len())?;
        if dst.len() != blocks {
            return Err(TensorError::Argument {
                op: OP,
                name: "dst",
                reason: format!(
                    "holds {} blocks, but {} {} values need {blocks}",
                    dst.len(),
                    src.len(),
                    Self::DTYPE
                ),
            });
        }
        for (values, block) in src.chunks_exact(Self::DTYPE.block_len()).zip(dst) {
            *block = Self::quantize_block(values);
        }
        Ok(())
    }
}

/// The number of `dtype` blocks that `values` values fill, or an error naming `op` when
/// `values` is not a whole number of blocks.
pub(crate) fn blocks_in_values(op: &'static str, dtype: DType, values: usize) -> Result<usize> {
    let block_len = dtype.block_len();
    if !values.is_multiple_of(block_len) {
        return Err(TensorError::Argument {
            op,
            name: "src",
            reason: format!(
                "{values} values is not a multiple of the {dtype} block length {block_len}"
            ),
        });
    }
    Ok(values / block_len)
}

/// The number of `dtype` blocks in `bytes` bytes of argument `name`, or an error naming
/// `op` when the bytes are not a whole number of blocks.
pub(crate) fn blocks_in_bytes(
    op: &'static str,
    name: &'static str,
    dtype: DType,
    bytes: usize,
) -> Result<usize> {
    let block_bytes = dtype.block_bytes();
    if !bytes.is_multiple_of(block_bytes) {
        return Err(TensorError::Argument {
            op,
            name,
            reason: format!(
                "{bytes} bytes is not a multiple of the {dtype} block size {block_bytes}"
            ),
        });
    }
    Ok(bytes / block_bytes)
}

/// Checks that a destination of `got` values holds exactly `blocks` blocks of `dtype`.
pub(crate) fn check_value_count(
    op: &'static str,
    dtype: DType,
    blocks: usize,
    got: usize,
) -> Result<()> {
    let expected = blocks.checked_mul(dtype.block_len());
    if expected != Some(got) {
        return Err(TensorError::DataLength {
            op,
            got,
            expected: expected.unwrap_or(usize::MAX),
            shape: Shape::new(&[blocks, dtype.block_len()]).unwrap_or_default(),
        });
    }
    Ok(())
}

/// Views a block's values as a fixed-size array.
///
/// # Panics
///
/// If `values.len() != N` (the block-level contract of [`QuantBlock`]).
pub(crate) fn block_values<const N: usize>(values: &[f32], dtype: DType) -> &[f32; N] {
    match values.try_into() {
        Ok(array) => array,
        Err(_) => panic!("a {dtype} block holds {N} values, got {}", values.len()),
    }
}

/// Views a block's output values as a fixed-size array.
///
/// # Panics
///
/// If `values.len() != N` (the block-level contract of [`QuantBlock`]).
pub(crate) fn block_values_mut<const N: usize>(values: &mut [f32], dtype: DType) -> &mut [f32; N] {
    let len = values.len();
    match values.try_into() {
        Ok(array) => array,
        Err(_) => panic!("a {dtype} block holds {N} values, got {len}"),
    }
}
