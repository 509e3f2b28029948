//! Element types, including GGUF's block-quantized formats.

use std::fmt;

/// The element type of a tensor.
///
/// Plain dtypes store one value per element. Block-quantized dtypes (GGUF/ggml formats)
/// store `block_len()` elements in one `block_bytes()`-byte block; their layouts count
/// storage in blocks along the last dimension (see [`crate::layout::Layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DType {
    /// 64-bit float (gradient checks and references).
    F64,
    /// 32-bit float.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// 32-bit signed integer.
    I32,
    /// 32-bit unsigned integer (token ids, indices).
    U32,
    /// Byte.
    U8,
    /// ggml Q4_0: 32 values, one f16 scale, 4-bit quants.
    Q4_0,
    /// ggml Q4_1: 32 values, f16 scale and min, 4-bit quants.
    Q4_1,
    /// ggml Q5_0: 32 values, f16 scale, 5-bit quants.
    Q5_0,
    /// ggml Q5_1: 32 values, f16 scale and min, 5-bit quants.
    Q5_1,
    /// ggml Q8_0: 32 values, f16 scale, 8-bit quants.
    Q8_0,
    /// ggml Q8_1: 32 values, f16 scale and f16 scaled sum, 8-bit quants (activations).
    Q8_1,
    /// ggml Q2_K: 256-value super-block, 2-bit quants.
    Q2K,
    /// ggml Q3_K: 256-value super-block, 3-bit quants.
    Q3K,
    /// ggml Q4_K: 256-value super-block, 4-bit quants.
    Q4K,
    /// ggml Q5_K: 256-value super-block, 5-bit quants.
    Q5K,
    /// ggml Q6_K: 256-value super-block, 6-bit quants.
    Q6K,
    /// ggml Q8_K: 256-value super-block, f32 scale, 8-bit quants and block sums (activations).
    Q8K,
    /// ggml IQ2_XXS: 256-value super-block, 2.06 bits per value (8-value grid entries).
    IQ2XXS,
    /// ggml IQ2_XS: 256-value super-block, 2.31 bits per value.
    IQ2XS,
    /// ggml IQ3_XXS: 256-value super-block, 3.06 bits per value (4-value grid entries).
    IQ3XXS,
    /// ggml IQ1_S: 256-value super-block, 1.56 bits per value (ternary grid entries).
    IQ1S,
    /// ggml IQ4_NL: 32 values, one f16 scale, 4-bit indices into 16 non-linear levels.
    IQ4NL,
    /// ggml IQ3_S: 256-value super-block, 3.44 bits per value.
    IQ3S,
    /// ggml IQ2_S: 256-value super-block, 2.56 bits per value.
    IQ2S,
    /// ggml IQ4_XS: 256-value super-block, IQ4_NL's levels with 6-bit sub-block scales.
    IQ4XS,
    /// ggml IQ1_M: 256-value super-block, 1.75 bits per value.
    IQ1M,
    /// ggml TQ1_0: 256-value super-block, ternary values five to a byte (1.69 bits).
    TQ1_0,
    /// ggml TQ2_0: 256-value super-block, ternary values in 2 bits each.
    TQ2_0,
    /// ggml MXFP4: 32 values, one E8M0 power-of-two scale, 4-bit E2M1 values (gpt-oss's
    /// experts).
    MXFP4,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 31] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::U8,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q8_1,
        DType::Q2K,
        DType::Q3K,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        DType::Q8K,
        DType::IQ2XXS,
        DType::IQ2XS,
        DType::IQ3XXS,
        DType::IQ1S,
        DType::IQ4NL,
        DType::IQ3S,
        DType::IQ2S,
        DType::IQ4XS,
        DType::IQ1M,
        DType::TQ1_0,
        DType::TQ2_0,
        DType::MXFP4,
    ];

    /// Elements per storage unit: 1 for plain dtypes, 32 or 256 for block formats.
    pub const fn block_len(self) -> usize {
        match self {
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => 1,
            DType::I32 | DType::U32 | DType::U8 => 1,
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 | DType::Q8_1 => 32,
            DType::IQ4NL | DType::MXFP4 => 32,
            DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K | DType::Q8K => 256,
            DType::IQ2XXS | DType::IQ2XS | DType::IQ2S | DType::IQ3XXS | DType::IQ3S => 256,
            DType::IQ1S | DType::IQ1M | DType::IQ4XS | DType::TQ1_0 | DType::TQ2_0 => 256,
        }
    }

    /// Bytes per storage unit: the element size for plain dtypes, the block size for
    /// block formats.
    pub const fn block_bytes(self) -> usize {
        match self {
            DType::F64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 => 1,
            DType::Q4_0 | DType::IQ4NL => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q8_0 => 34,
            DType::Q8_1 => 36,
            DType::Q2K => 84,
            DType::Q3K => 110,
            DType::Q4K => 144,
            DType::Q5K => 176,
            DType::Q6K => 210,
            DType::Q8K => 292,
            DType::IQ2XXS | DType::TQ2_0 => 66,
            DType::IQ2XS => 74,
            DType::IQ2S => 82,
            DType::IQ3XXS => 98,
            DType::IQ3S => 110,
            DType::IQ1S => 50,
            DType::IQ1M => 56,
            DType::IQ4XS => 136,
            DType::TQ1_0 => 54,
            DType::MXFP4 => 17,
        }
    }

    /// Whether this is a block-quantized format.
    pub const fn is_quantized(self) -> bool {
        self.block_len() > 1
    }

    /// Whether this is a float dtype with one value per element (F64, F32, F16, BF16).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// Bytes needed to store `elements` values laid out contiguously, or `None` when
    /// `elements` is not a multiple of the block length or the size overflows.
    pub const fn bytes_for(self, elements: usize) -> Option<usize> {
        let bl = self.block_len();
        if !elements.is_multiple_of(bl) {
            return None;
        }
        (elements / bl).checked_mul(self.block_bytes())
    }

    /// The GGUF/ggml type id (`ggml_type`), or `None` for dtypes GGUF has no id for.
    pub const fn gguf_type_id(self) -> Option<u32> {
        Some(match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q5_0 => 6,
            DType::Q5_1 => 7,
            DType::Q8_0 => 8,
            DType::Q8_1 => 9,
            DType::Q2K => 10,
            DType::Q3K => 11,
            DType::Q4K => 12,
            DType::Q5K => 13,
            DType::Q6K => 14,
            DType::Q8K => 15,
            DType::IQ2XXS => 16,
            DType::IQ2XS => 17,
            DType::IQ3XXS => 18,
            DType::IQ1S => 19,
            DType::IQ4NL => 20,
            DType::IQ3S => 21,
            DType::IQ2S => 22,
            DType::IQ4XS => 23,
            DType::IQ1M => 29,
            DType::TQ1_0 => 34,
            DType::TQ2_0 => 35,
            DType::MXFP4 => 39,
            DType::I32 => 26,
            DType::F64 => 28,
            DType::BF16 => 30,
            DType::U32 | DType::U8 => return None,
        })
    }

    /// The dtype with GGUF/ggml type id `id`, if tempra supports it.
    pub const fn from_gguf_type_id(id: u32) -> Option<DType> {
        Some(match id {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::Q4_0,
            3 => DType::Q4_1,
            6 => DType::Q5_0,
            7 => DType::Q5_1,
            8 => DType::Q8_0,
            9 => DType::Q8_1,
            10 => DType::Q2K,
            11 => DType::Q3K,
            12 => DType::Q4K,
            13 => DType::Q5K,
            14 => DType::Q6K,
            15 => DType::Q8K,
            16 => DType::IQ2XXS,
            17 => DType::IQ2XS,
            18 => DType::IQ3XXS,
            19 => DType::IQ1S,
            20 => DType::IQ4NL,
            21 => DType::IQ3S,
            22 => DType::IQ2S,
            23 => DType::IQ4XS,
            29 => DType::IQ1M,
            34 => DType::TQ1_0,
            35 => DType::TQ2_0,
            39 => DType::MXFP4,
            26 => DType::I32,
            28 => DType::F64,
            30 => DType::BF16,
            _ => return None,
        })
    }

    /// The name GGUF tools print for this dtype (`q4_K`, `f16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::U8 => "u8",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::Q8_0 => "q8_0",
            DType::Q8_1 => "q8_1",
            DType::Q2K => "q2_K",
            DType::Q3K => "q3_K",
            DType::Q4K => "q4_K",
            DType::Q5K => "q5_K",
            DType::Q6K => "q6_K",
            DType::Q8K => "q8_K",
            DType::IQ2XXS => "iq2_xxs",
            DType::IQ2XS => "iq2_xs",
            DType::IQ3XXS => "iq3_xxs",
            DType::IQ1S => "iq1_s",
            DType::IQ4NL => "iq4_nl",
            DType::IQ3S => "iq3_s",
            DType::IQ2S => "iq2_s",
            DType::IQ4XS => "iq4_xs",
            DType::IQ1M => "iq1_m",
            DType::TQ1_0 => "tq1_0",
            DType::TQ2_0 => "tq2_0",
            DType::MXFP4 => "mxfp4",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_ids_round_trip() {
        for dt in DType::ALL {
            if let Some(id) = dt.gguf_type_id() {
                assert_eq!(DType::from_gguf_type_id(id), Some(dt));
            }
        }
        assert_eq!(
            DType::from_gguf_type_id(4),
            None,
            "Q4_2 was removed from ggml"
        );
    }

    #[test]
    fn bytes_for_respects_blocks() {
        assert_eq!(DType::Q4_0.bytes_for(64), Some(36));
        assert_eq!(DType::Q4_0.bytes_for(33), None);
        assert_eq!(DType::Q6K.bytes_for(512), Some(420));
        assert_eq!(DType::F16.bytes_for(3), Some(6));
        assert_eq!(DType::F32.bytes_for(usize::MAX), None);
    }

    /// ggml's `type_traits` (block size, type size) and `ggml_type` ids of the I-quants
    /// and ternary types.
    #[test]
    fn i_quants_have_ggml_sizes_and_ids() {
        let expected = [
            (DType::IQ2XXS, 16, 256, 66),
            (DType::IQ2XS, 17, 256, 74),
            (DType::IQ3XXS, 18, 256, 98),
            (DType::IQ1S, 19, 256, 50),
            (DType::IQ4NL, 20, 32, 18),
            (DType::IQ3S, 21, 256, 110),
            (DType::IQ2S, 22, 256, 82),
            (DType::IQ4XS, 23, 256, 136),
            (DType::IQ1M, 29, 256, 56),
            (DType::TQ1_0, 34, 256, 54),
            (DType::TQ2_0, 35, 256, 66),
            (DType::MXFP4, 39, 32, 17),
        ];
        for (dtype, id, block_len, block_bytes) in expected {
            assert_eq!(dtype.gguf_type_id(), Some(id), "{dtype}");
            assert_eq!(DType::from_gguf_type_id(id), Some(dtype));
            assert_eq!(
                (dtype.block_len(), dtype.block_bytes()),
                (block_len, block_bytes)
            );
            assert!(dtype.is_quantized());
        }
    }
}
