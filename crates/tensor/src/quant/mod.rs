//! GGUF/ggml block-quantization formats.

// TEMPORARY SHIM (added by the tensor-core author so the crate builds while the quant
// module is being written; the quant author replaces these with the real functions).
/// Placeholder: replaced by the real implementation.
pub fn quantize_row(dtype: crate::DType, _src: &[f32], _dst: &mut [u8]) -> crate::Result<()> {
    Err(crate::TensorError::DType { op: "quantize_row", dtype, what: "quant module pending" })
}
/// Placeholder: replaced by the real implementation.
pub fn dequantize_row(dtype: crate::DType, _src: &[u8], _dst: &mut [f32]) -> crate::Result<()> {
    Err(crate::TensorError::DType { op: "dequantize_row", dtype, what: "quant module pending" })
}
