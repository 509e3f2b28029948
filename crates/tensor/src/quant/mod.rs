//! GGUF/ggml block-quantization formats.
//!
//! Each format is one `#[repr(C)]` [`bytemuck::Pod`] struct, byte-compatible with ggml's
//! `block_*` type of the same name, with the scalar reference dequantizer
//! ([`QuantBlock`]), the quantizer where the format has one without an importance matrix
//! ([`QuantizeBlock`]) and the scalar reference quantized dot product ([`QuantDot`]).
//! These are the executable specification that every fast kernel (SIMD CPU, WGSL) is
//! tested against:
//!
//! - quantization follows what `llama-quantize` runs without an importance matrix
//!   (ggml's `quantize_row_*_ref`; `quantize_iq4_nl`/`quantize_iq4_xs` for the IQ4
//!   formats), so a tensor quantized here has the bytes `llama-quantize` would write; the
//!   IQ1, IQ2 and IQ3 formats are read, never written (llama.cpp needs an importance
//!   matrix for most of them), and [`quantize_row`] says so;
//! - dequantization follows ggml's `dequantize_row_*`, bit for bit;
//! - [`vec_dot`] follows ggml's scalar `ggml_vec_dot_*_q8_*`: integer sums per block,
//!   scaled once per block.
//!
//! [`quantize_row`], [`dequantize_row`] and [`vec_dot`] are the type-erased entry points:
//! they take raw bytes at any alignment, check every length and return a
//! [`TensorError`] rather than panic.

mod iq1_m;
mod iq1_s;
mod iq2_s;
mod iq2_xs;
mod iq2_xxs;
mod iq3_s;
mod iq3_xxs;
mod iq4_nl;
mod iq4_search;
mod iq4_xs;
mod iq_grid_data;
pub mod iq_grids;
mod mxfp4;
mod q2_k;
mod q3_k;
mod q4_0;
mod q4_1;
mod q4_k;
mod q5_0;
mod q5_1;
mod q5_k;
mod q6_k;
mod q8_0;
mod q8_1;
mod q8_k;
mod quant_block;
mod random_blocks;
mod scale_min_k4;
mod scale_search;
mod signed_grid;
mod ternary;
mod ternary_grid;
mod tq1_0;
mod tq2_0;
mod vec_dot;

pub use iq1_m::BlockIQ1M;
pub use iq1_s::BlockIQ1S;
pub use iq2_s::BlockIQ2S;
pub use iq2_xs::BlockIQ2XS;
pub use iq2_xxs::BlockIQ2XXS;
pub use iq3_s::BlockIQ3S;
pub use iq3_xxs::BlockIQ3XXS;
pub use iq4_nl::BlockIQ4NL;
pub use iq4_xs::BlockIQ4XS;
pub use mxfp4::{BlockMXFP4, KVALUES_MXFP4, e8m0_to_f32_half};
pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_0::BlockQ4_0;
pub use q4_1::BlockQ4_1;
pub use q4_k::BlockQ4K;
pub use q5_0::BlockQ5_0;
pub use q5_1::BlockQ5_1;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8_0::BlockQ8_0;
pub use q8_1::BlockQ8_1;
pub use q8_k::BlockQ8K;
pub use quant_block::{QuantBlock, QuantizeBlock};
pub use random_blocks::random_blocks;
pub use scale_min_k4::{K_SCALE_SIZE, pack_scale_min, scale_min};
pub use tq1_0::BlockTQ1_0;
pub use tq2_0::BlockTQ2_0;
pub use vec_dot::{QuantDot, vec_dot, vec_dot_dtype};

use crate::dtype::DType;
use crate::error::{Result, TensorError};

/// The I-quant and ternary formats (llama.cpp's `IQ*` and `TQ*` types).
pub const I_QUANTS: [DType; 11] = [
    DType::IQ4NL,
    DType::IQ4XS,
    DType::IQ3S,
    DType::IQ3XXS,
    DType::IQ2S,
    DType::IQ2XS,
    DType::IQ2XXS,
    DType::IQ1S,
    DType::IQ1M,
    DType::TQ1_0,
    DType::TQ2_0,
];

/// Calls `$func::<Block>($args)` for the block struct of `$dtype`, or returns a
/// [`TensorError::DType`] naming `$op` when `$dtype` is not a block format.
macro_rules! dispatch_block {
    ($dtype:expr, $op:expr, $func:ident($($arg:expr),* $(,)?)) => {
        match $dtype {
            DType::IQ2XXS => $func::<$crate::quant::BlockIQ2XXS>($($arg),*),
            DType::IQ2XS => $func::<$crate::quant::BlockIQ2XS>($($arg),*),
            DType::IQ2S => $func::<$crate::quant::BlockIQ2S>($($arg),*),
            DType::IQ3XXS => $func::<$crate::quant::BlockIQ3XXS>($($arg),*),
            DType::IQ3S => $func::<$crate::quant::BlockIQ3S>($($arg),*),
            DType::IQ1S => $func::<$crate::quant::BlockIQ1S>($($arg),*),
            DType::IQ1M => $func::<$crate::quant::BlockIQ1M>($($arg),*),
            other => $crate::quant::dispatch_quantizable!(other, $op, $func($($arg),*)),
        }
    };
}
pub(crate) use dispatch_block;

/// Calls `$func::<Block>($args)` for the block struct of `$dtype` if it is a format with
/// a quantizer ([`QuantizeBlock`]), or returns a [`TensorError::DType`] naming `$op`.
macro_rules! dispatch_quantizable {
    ($dtype:expr, $op:expr, $func:ident($($arg:expr),* $(,)?)) => {
        match $dtype {
            DType::IQ4NL => $func::<$crate::quant::BlockIQ4NL>($($arg),*),
            DType::IQ4XS => $func::<$crate::quant::BlockIQ4XS>($($arg),*),
            DType::MXFP4 => $func::<$crate::quant::BlockMXFP4>($($arg),*),
            DType::TQ1_0 => $func::<$crate::quant::BlockTQ1_0>($($arg),*),
            DType::TQ2_0 => $func::<$crate::quant::BlockTQ2_0>($($arg),*),
            DType::Q4_0 => $func::<$crate::quant::BlockQ4_0>($($arg),*),
            DType::Q4_1 => $func::<$crate::quant::BlockQ4_1>($($arg),*),
            DType::Q5_0 => $func::<$crate::quant::BlockQ5_0>($($arg),*),
            DType::Q5_1 => $func::<$crate::quant::BlockQ5_1>($($arg),*),
            DType::Q8_0 => $func::<$crate::quant::BlockQ8_0>($($arg),*),
            DType::Q8_1 => $func::<$crate::quant::BlockQ8_1>($($arg),*),
            DType::Q2K => $func::<$crate::quant::BlockQ2K>($($arg),*),
            DType::Q3K => $func::<$crate::quant::BlockQ3K>($($arg),*),
            DType::Q4K => $func::<$crate::quant::BlockQ4K>($($arg),*),
            DType::Q5K => $func::<$crate::quant::BlockQ5K>($($arg),*),
            DType::Q6K => $func::<$crate::quant::BlockQ6K>($($arg),*),
            DType::Q8K => $func::<$crate::quant::BlockQ8K>($($arg),*),
            other => Err($crate::error::TensorError::DType {
                op: $op,
                dtype: other,
                what: if other.is_quantized() {
                    "a block format with a quantizer (the IQ1, IQ2 and IQ3 formats are read-only)"
                } else {
                    "a block-quantized dtype"
                },
            }),
        }
    };
}
pub(crate) use dispatch_quantizable;

/// Quantizes `src` (a multiple of `dtype.block_len()` values) to `dtype`, writing the
/// ggml block bytes to `dst`, which must be exactly `dtype.bytes_for(src.len())` bytes.
///
/// `dst` may have any alignment. Every block dtype with a quantizer
/// ([`has_quantizer`]) is accepted, including the activation formats Q8_1 and Q8_K;
/// others (the IQ1/IQ2/IQ3 formats, plain dtypes) give [`TensorError::DType`], wrong
/// lengths [`TensorError::Argument`].
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    dispatch_quantizable!(dtype, "quantize_row", quantize_bytes(src, dst))
}

/// Whether [`quantize_row`] can write `dtype`: every block format but the IQ1, IQ2 and
/// IQ3 ones.
pub fn has_quantizer(dtype: DType) -> bool {
    fn format<B: QuantizeBlock>() -> Result<DType> {
        Ok(B::DTYPE)
    }
    dispatch_quantizable!(dtype, "has_quantizer", format()).is_ok()
}

/// Dequantizes the `dtype` blocks in `src` (a multiple of `dtype.block_bytes()` bytes, any
/// alignment) into `dst`, which must hold exactly the blocks' values.
///
/// Non-block dtypes give [`TensorError::DType`]; a ragged `src` gives
/// [`TensorError::Argument`], a `dst` of the wrong length [`TensorError::DataLength`].
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    dispatch_block!(dtype, "dequantize_row", dequantize_bytes(src, dst))
}

fn quantize_bytes<B: QuantizeBlock>(src: &[f32], dst: &mut [u8]) -> Result<()> {
    const OP: &str = "quantize_row";
    let (block_len, block_bytes) = (B::DTYPE.block_len(), size_of::<B>());
    let blocks = quant_block::blocks_in_values(OP, B::DTYPE, src.len())?;
    if dst.len() != blocks * block_bytes {
        return Err(TensorError::Argument {
            op: OP,
            name: "dst",
            reason: format!(
                "holds {} bytes, but {} {} values need {}",
                dst.len(),
                src.len(),
                B::DTYPE,
                blocks * block_bytes
            ),
        });
    }
    for (values, out) in src
        .chunks_exact(block_len)
        .zip(dst.chunks_exact_mut(block_bytes))
    {
        out.copy_from_slice(bytemuck::bytes_of(&B::quantize_block(values)));
    }
    Ok(())
}

fn dequantize_bytes<B: QuantBlock>(src: &[u8], dst: &mut [f32]) -> Result<()> {
    const OP: &str = "dequantize_row";
    let (block_len, block_bytes) = (B::DTYPE.block_len(), size_of::<B>());
    let blocks = quant_block::blocks_in_bytes(OP, "src", B::DTYPE, src.len())?;
    quant_block::check_value_count(OP, B::DTYPE, blocks, dst.len())?;
    for (bytes, out) in src
        .chunks_exact(block_bytes)
        .zip(dst.chunks_exact_mut(block_len))
    {
        bytemuck::pod_read_unaligned::<B>(bytes).dequantize_block(out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytemuck::Zeroable;

    use super::*;

    /// The block formats with a quantizer, and those without.
    fn block_dtypes(writable: bool) -> impl Iterator<Item = DType> {
        DType::ALL
            .into_iter()
            .filter(move |&d| d.is_quantized() && has_quantizer(d) == writable)
    }

    fn wave(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (i as f32 * 0.37).sin() * 3.0 - 0.25)
            .collect()
    }

    #[test]
    fn block_structs_have_ggml_sizes() {
        // sizeof(block_*) in ggml-common.h.
        let sizes = [
            size_of::<BlockQ4_0>(),
            size_of::<BlockQ4_1>(),
            size_of::<BlockQ5_0>(),
            size_of::<BlockQ5_1>(),
            size_of::<BlockQ8_0>(),
            size_of::<BlockQ8_1>(),
            size_of::<BlockQ2K>(),
            size_of::<BlockQ3K>(),
            size_of::<BlockQ4K>(),
            size_of::<BlockQ5K>(),
            size_of::<BlockQ6K>(),
            size_of::<BlockQ8K>(),
        ];
        assert_eq!(sizes, [18, 20, 22, 24, 34, 36, 84, 110, 144, 176, 210, 292]);
        let sizes = [
            size_of::<BlockIQ2XXS>(),
            size_of::<BlockIQ2XS>(),
            size_of::<BlockIQ2S>(),
            size_of::<BlockIQ3XXS>(),
            size_of::<BlockIQ3S>(),
            size_of::<BlockIQ1S>(),
            size_of::<BlockIQ1M>(),
            size_of::<BlockIQ4NL>(),
            size_of::<BlockIQ4XS>(),
            size_of::<BlockTQ1_0>(),
            size_of::<BlockTQ2_0>(),
            size_of::<BlockMXFP4>(),
        ];
        assert_eq!(sizes, [66, 74, 82, 98, 110, 50, 56, 18, 136, 54, 66, 17]);
        assert_eq!(align_of::<BlockQ8K>(), 4);
        assert_eq!(align_of::<BlockQ6K>(), 2);
    }

    #[test]
    fn typed_rows_check_lengths() {
        let src = wave(64);
        let mut blocks = [BlockQ4_0::zeroed(); 2];
        assert!(BlockQ4_0::quantize_row(&src[..40], &mut blocks).is_err());
        assert!(BlockQ4_0::quantize_row(&src[..32], &mut blocks).is_err());
        BlockQ4_0::quantize_row(&src, &mut blocks).unwrap();
        let mut out = vec![0f32; 64];
        assert!(BlockQ4_0::dequantize_row(&blocks, &mut out[..63]).is_err());
        BlockQ4_0::dequantize_row(&blocks, &mut out).unwrap();
        let mut bytes = vec![0u8; 36];
        quantize_row(DType::Q4_0, &src, &mut bytes).unwrap();
        assert_eq!(bytes, bytemuck::cast_slice::<BlockQ4_0, u8>(&blocks));
    }

    #[test]
    fn plain_dtypes_are_rejected() {
        for dtype in [DType::F32, DType::F16, DType::U8] {
            let err = quantize_row(dtype, &[0.0; 32], &mut [0; 128]).unwrap_err();
            assert!(matches!(err, TensorError::DType { .. }), "{err}");
            let err = dequantize_row(dtype, &[0; 128], &mut [0.0; 32]).unwrap_err();
            assert!(matches!(err, TensorError::DType { .. }), "{err}");
        }
    }

    #[test]
    fn read_only_formats_refuse_quantization_but_dequantize() {
        for dtype in block_dtypes(false) {
            assert!(!has_quantizer(dtype));
            let bl = dtype.block_len();
            let err = quantize_row(dtype, &wave(bl), &mut vec![0; dtype.block_bytes()]);
            let err = err.unwrap_err().to_string();
            assert!(
                err.contains(dtype.name()) && err.contains("read-only"),
                "{err}"
            );
            let blocks = random_blocks(dtype, 2, 1.0, 1).unwrap();
            let mut out = vec![0f32; 2 * bl];
            dequantize_row(dtype, &blocks, &mut out).unwrap();
            assert!(dequantize_row(dtype, &blocks[1..], &mut out).is_err());
            assert!(dequantize_row(dtype, &blocks, &mut out[1..]).is_err());
        }
        assert_eq!(block_dtypes(true).count(), 17);
        assert_eq!(block_dtypes(false).count(), 7);
        assert!(!has_quantizer(DType::F32));
    }

    #[test]
    fn bad_lengths_are_errors_not_panics() {
        for dtype in block_dtypes(true) {
            let (bl, bb) = (dtype.block_len(), dtype.block_bytes());
            let src = wave(2 * bl);
            let mut dst = vec![0u8; 2 * bb];
            assert!(quantize_row(dtype, &src[..bl + 1], &mut dst).is_err());
            assert!(quantize_row(dtype, &src, &mut dst[..2 * bb - 1]).is_err());
            assert!(quantize_row(dtype, &src[..bl], &mut dst).is_err());
            quantize_row(dtype, &src, &mut dst).unwrap();
            let mut out = vec![0f32; 2 * bl];
            assert!(dequantize_row(dtype, &dst[..bb + 1], &mut out).is_err());
            assert!(dequantize_row(dtype, &dst, &mut out[..bl]).is_err());
            assert!(dequantize_row(dtype, &dst, &mut vec![0f32; 2 * bl + 1]).is_err());
            dequantize_row(dtype, &dst, &mut out).unwrap();
        }
    }

    #[test]
    fn empty_rows_are_fine() {
        for dtype in block_dtypes(true) {
            quantize_row(dtype, &[], &mut []).unwrap();
            dequantize_row(dtype, &[], &mut []).unwrap();
        }
    }

    #[test]
    fn unaligned_bytes_give_the_same_values() {
        for dtype in block_dtypes(true) {
            let n = 2 * dtype.block_len();
            let bytes = dtype.bytes_for(n).unwrap();
            let src = wave(n);
            let mut aligned = vec![0u8; bytes];
            quantize_row(dtype, &src, &mut aligned).unwrap();
            // Every offset 1..4 from an allocation start breaks the 2- and 4-byte alignment.
            for offset in 1..4 {
                let mut storage = vec![0u8; bytes + offset];
                quantize_row(dtype, &src, &mut storage[offset..]).unwrap();
                assert_eq!(&storage[offset..], &aligned[..], "{dtype} offset {offset}");
                let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
                dequantize_row(dtype, &aligned, &mut a).unwrap();
                dequantize_row(dtype, &storage[offset..], &mut b).unwrap();
                assert_eq!(a, b, "{dtype} offset {offset}");
            }
        }
    }
}
