//! The WGSL kernels and the Rust that dispatches them: one module (and one `.wgsl`
//! file) per kernel family. Shared WGSL snippets are concatenated in front of each
//! kernel's source; snippets written against a placeholder binding name `BUF` are
//! instantiated per binding.

pub(crate) mod attention;
pub(crate) mod copy;
pub(crate) mod elementwise;
pub(crate) mod embedding;
pub(crate) mod experts;
pub(crate) mod linear;
pub(crate) mod matmul;
pub(crate) mod norm;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod rows;
pub(crate) mod softmax;

use tempra_tensor::DType;

/// The parameter block, layout walking and NaN helpers.
pub(crate) const COMMON: &str = include_str!("common.wgsl");
/// Float loads (f32/f16/bf16) from an `array<u32>` binding named `BUF`.
pub(crate) const LOAD: &str = include_str!("load.wgsl");
/// GGUF block dequantization from an `array<u32>` binding named `BUF`.
pub(crate) const DEQUANT: &str = include_str!("dequant.wgsl");
/// f32 to f16/bf16/integer conversions.
pub(crate) const CONVERT: &str = include_str!("convert.wgsl");

/// A kernel's WGSL: the f16 prelude (or an f32 `dq` alias), the common part, then
/// `parts` in order.
pub(crate) fn compose(f16: bool, parts: &[&str]) -> String {
    let mut s = String::with_capacity(8192);
    if f16 {
        s.push_str("enable f16;\nalias dq = f16;\n");
    } else {
        s.push_str("alias dq = f32;\n");
    }
    s.push_str(COMMON);
    for part in parts {
        s.push('\n');
        s.push_str(part);
    }
    s
}

/// `snippet` instantiated for the binding named `name`.
pub(crate) fn for_binding(snippet: &str, name: &str) -> String {
    snippet.replace("BUF", name)
}

/// The code the shaders use for a dtype, or `None` when no kernel reads it.
pub(crate) fn dtype_code(dtype: DType) -> Option<u32> {
    Some(match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::I32 => 3,
        DType::U32 => 4,
        DType::U8 => 5,
        DType::F64 => 6,
        DType::Q4_0 => 10,
        DType::Q8_0 => 11,
        DType::Q4K => 12,
        DType::Q5K => 13,
        DType::Q6K => 14,
        DType::IQ4NL => 15,
        DType::IQ4XS => 16,
        DType::MXFP4 => 17,
        _ => return None,
    })
}

/// Whether `dtype` is a float the shaders load (f32, f16, bf16).
pub(crate) fn is_gpu_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Whether `dtype` is a block format the shaders dequantize.
pub(crate) fn is_gpu_block(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Q4_0
            | DType::Q8_0
            | DType::Q4K
            | DType::Q5K
            | DType::Q6K
            | DType::IQ4NL
            | DType::IQ4XS
            | DType::MXFP4
    )
}
