//! `QuantType`: the target of `tempra quantize` (llama.cpp's `llama_ftype`).

use std::fmt;
use std::str::FromStr;

use tempra_tensor::DType;

use crate::error::LlmError;

/// A whole-model target type, as `llama-quantize` names them. The `_m` ("medium") types
/// mix dtypes per tensor (see [`super::TensorTypePlanner`]); the others use one dtype
/// for every quantizable tensor (the output tensor still gets Q6_K for the block types,
/// as llama.cpp does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantType {
    /// All f32.
    F32,
    /// f16 weights.
    F16,
    /// bf16 weights.
    BF16,
    /// Q8_0.
    Q8_0,
    /// Q4_0.
    Q4_0,
    /// Q4_1.
    Q4_1,
    /// Q5_0.
    Q5_0,
    /// Q5_1.
    Q5_1,
    /// Q2_K (with Q3_K/Q4_K for the sensitive tensors).
    Q2K,
    /// Q3_K_M.
    Q3KM,
    /// Q4_K_M.
    Q4KM,
    /// Q5_K_M.
    Q5KM,
    /// Q6_K.
    Q6K,
}

impl QuantType {
    /// Every type.
    pub const ALL: [QuantType; 13] = [
        QuantType::F32,
        QuantType::F16,
        QuantType::BF16,
        QuantType::Q8_0,
        QuantType::Q4_0,
        QuantType::Q4_1,
        QuantType::Q5_0,
        QuantType::Q5_1,
        QuantType::Q2K,
        QuantType::Q3KM,
        QuantType::Q4KM,
        QuantType::Q5KM,
        QuantType::Q6K,
    ];

    /// The lowercase name (`q4_k_m`).
    pub const fn name(self) -> &'static str {
        match self {
            QuantType::F32 => "f32",
            QuantType::F16 => "f16",
            QuantType::BF16 => "bf16",
            QuantType::Q8_0 => "q8_0",
            QuantType::Q4_0 => "q4_0",
            QuantType::Q4_1 => "q4_1",
            QuantType::Q5_0 => "q5_0",
            QuantType::Q5_1 => "q5_1",
            QuantType::Q2K => "q2_k",
            QuantType::Q3KM => "q3_k_m",
            QuantType::Q4KM => "q4_k_m",
            QuantType::Q5KM => "q5_k_m",
            QuantType::Q6K => "q6_k",
        }
    }

    /// The dtype of most quantizable tensors.
    pub const fn base_dtype(self) -> DType {
        match self {
            QuantType::F32 => DType::F32,
            QuantType::F16 => DType::F16,
            QuantType::BF16 => DType::BF16,
            QuantType::Q8_0 => DType::Q8_0,
            QuantType::Q4_0 => DType::Q4_0,
            QuantType::Q4_1 => DType::Q4_1,
            QuantType::Q5_0 => DType::Q5_0,
            QuantType::Q5_1 => DType::Q5_1,
            QuantType::Q2K => DType::Q2K,
            QuantType::Q3KM => DType::Q3K,
            QuantType::Q4KM => DType::Q4K,
            QuantType::Q5KM => DType::Q5K,
            QuantType::Q6K => DType::Q6K,
        }
    }

    /// llama.cpp's `llama_ftype` value, stored as `general.file_type`.
    pub const fn file_type(self) -> u32 {
        match self {
            QuantType::F32 => 0,
            QuantType::F16 => 1,
            QuantType::Q4_0 => 2,
            QuantType::Q4_1 => 3,
            QuantType::Q8_0 => 7,
            QuantType::Q5_0 => 8,
            QuantType::Q5_1 => 9,
            QuantType::Q2K => 10,
            QuantType::Q3KM => 12,
            QuantType::Q4KM => 15,
            QuantType::Q5KM => 17,
            QuantType::Q6K => 18,
            QuantType::BF16 => 32,
        }
    }

    /// The type named `name` (case-insensitive), or `None`.
    pub fn from_name(name: &str) -> Option<QuantType> {
        QuantType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for QuantType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QuantType {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, LlmError> {
        QuantType::from_name(s).ok_or_else(|| LlmError::Argument {
            what: format!(
                "unknown quantization type `{s}` (expected one of {})",
                QuantType::ALL.map(|t| t.name()).join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in QuantType::ALL {
            assert_eq!(t.name().to_uppercase().parse::<QuantType>().unwrap(), t);
        }
        let e = "q4_k_s".parse::<QuantType>().unwrap_err().to_string();
        assert!(e.contains("q4_k_s") && e.contains("q4_k_m"), "{e}");
    }
}
