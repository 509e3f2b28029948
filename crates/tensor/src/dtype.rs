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
    /// Q4_0 with the rows interleaved in groups of eight: a CPU layout made at load for
    /// the decode GEMV (one sequential stream instead of eight), never stored in files.
    /// Per group of eight rows and per block column: the eight f16 scales, then the
    /// eight rows' 16 quant bytes in row order. See [`DType::row_group`].
    Q4_0R8,
    /// Q8_0 with the rows interleaved in groups of eight, as [`DType::Q4_0R8`]: per group
    /// and block column the eight f16 scales, then the eight rows' 32 quant bytes in row
    /// order (so rows `2p` and `2p + 1` are 64 contiguous bytes: one 512-bit load).
    Q8_0R8,
    /// Q4_K with the rows interleaved in groups of eight and the 6-bit scales unpacked
    /// (148 bytes per row and super-block): the CPU's decode and prefill layout, made at
    /// load, never stored in files. See `quant::interleaved_q4_k`.
    Q4KR8,
    /// Q6_K with the rows interleaved in groups of eight (the same 210 bytes per row
    /// and super-block, moved so that each 32-bit lane of a kernel's vector is one row):
    /// the CPU's decode layout, made at load, never stored in files. See
    /// `quant::interleaved_q6_k`.
    Q6KR8,
    /// Q5_K with the rows interleaved in groups of eight and the 6-bit scales unpacked
    /// (180 bytes per row and super-block), as [`DType::Q4KR8`] plus the fifth bits:
    /// the CPU's decode layout, made at load, never stored in files. See
    /// `quant::interleaved_q5_k`.
    Q5KR8,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 24] = [
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
        DType::Q4_0R8,
        DType::Q8_0R8,
        DType::Q4KR8,
        DType::Q6KR8,
        DType::Q5KR8,
    ];

    /// Elements per storage unit: 1 for plain dtypes, 32 or 256 for block formats.
    pub const fn block_len(self) -> usize {
        match self {
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => 1,
            DType::I32 | DType::U32 | DType::U8 => 1,
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 | DType::Q8_1 => 32,
            DType::Q4_0R8 | DType::Q8_0R8 => 32,
            DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K | DType::Q8K => 256,
            DType::Q4KR8 | DType::Q5KR8 | DType::Q6KR8 => 256,
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
            DType::Q4_0 | DType::Q4_0R8 => 18,
            DType::Q4_1 => 20,
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::Q8_0 | DType::Q8_0R8 => 34,
            DType::Q8_1 => 36,
            DType::Q2K => 84,
            DType::Q3K => 110,
            DType::Q4K => 144,
            DType::Q4KR8 => 148,
            DType::Q5KR8 => 180,
            DType::Q5K => 176,
            DType::Q6K | DType::Q6KR8 => 210,
            DType::Q8K => 292,
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
            DType::I32 => 26,
            DType::F64 => 28,
            DType::BF16 => 30,
            DType::U32
            | DType::U8
            | DType::Q4_0R8
            | DType::Q8_0R8
            | DType::Q4KR8
            | DType::Q5KR8
            | DType::Q6KR8 => {
                return None;
            }
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
            DType::Q4_0R8 => "q4_0_r8",
            DType::Q8_0R8 => "q8_0_r8",
            DType::Q4KR8 => "q4_K_r8",
            DType::Q6KR8 => "q6_K_r8",
            DType::Q5KR8 => "q5_K_r8",
        }
    }

    /// Rows interleaved per group: 8 for the `R8` layouts, 1 for every other dtype.
    /// An interleaved tensor `[N, K]` is contiguous, `N` a multiple of the group;
    /// `block_len` and `block_bytes` are per row and block, averaged over the group.
    pub const fn row_group(self) -> usize {
        match self {
            DType::Q4_0R8 | DType::Q8_0R8 | DType::Q4KR8 | DType::Q5KR8 | DType::Q6KR8 => 8,
            _ => 1,
        }
    }

    /// The format an interleaved layout holds the blocks of (`Q4_0` for `Q4_0R8`), or
    /// the dtype itself.
    pub const fn base_format(self) -> DType {
        match self {
            DType::Q4_0R8 => DType::Q4_0,
            DType::Q8_0R8 => DType::Q8_0,
            DType::Q4KR8 => DType::Q4K,
            DType::Q5KR8 => DType::Q5K,
            DType::Q6KR8 => DType::Q6K,
            other => other,
        }
    }

    /// The interleaved layout of this format, if there is one.
    pub const fn interleaved(self) -> Option<DType> {
        match self {
            DType::Q4_0 => Some(DType::Q4_0R8),
            DType::Q8_0 => Some(DType::Q8_0R8),
            DType::Q4K => Some(DType::Q4KR8),
            DType::Q5K => Some(DType::Q5KR8),
            DType::Q6K => Some(DType::Q6KR8),
            _ => None,
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
}
