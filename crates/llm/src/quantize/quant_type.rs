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
    /// IQ4_NL (with Q5_K for the sensitive tensors).
    IQ4NL,
    /// IQ4_XS (with Q5_K for the sensitive tensors).
    IQ4XS,
    /// MXFP4_MOE: a mixture of experts' stacked expert tensors in MXFP4, every other
    /// quantizable tensor in Q8_0 (how gpt-oss ships).
    MXFP4MOE,
}

impl QuantType {
    /// Every type.
    pub const ALL: [QuantType; 16] = [
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
        QuantType::IQ4NL,
        QuantType::IQ4XS,
        QuantType::MXFP4MOE,
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
            QuantType::IQ4NL => "iq4_nl",
            QuantType::IQ4XS => "iq4_xs",
            QuantType::MXFP4MOE => "mxfp4_moe",
        }
    }

    /// The dtype of most quantizable tensors (MXFP4_MOE: of the expert stacks; its other
    /// tensors are Q8_0).
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
            QuantType::IQ4NL => DType::IQ4NL,
            QuantType::IQ4XS => DType::IQ4XS,
            QuantType::MXFP4MOE => DType::MXFP4,
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
            QuantType::IQ4NL => 25,
            QuantType::IQ4XS => 30,
            QuantType::BF16 => 32,
            QuantType::MXFP4MOE => 38,
        }
    }

    /// llama.cpp's name of a `general.file_type` value (`llama_ftype`, as `llama-quantize`
    /// names it: `Q4_K_M`, `IQ2_XXS`, ...), including the types tempra does not write.
    pub fn file_type_name(file_type: u32) -> Option<&'static str> {
        const NAMES: [(u32, &str); 37] = [
            (0, "F32"),
            (1, "F16"),
            (2, "Q4_0"),
            (3, "Q4_1"),
            (7, "Q8_0"),
            (8, "Q5_0"),
            (9, "Q5_1"),
            (10, "Q2_K"),
            (11, "Q3_K_S"),
            (12, "Q3_K_M"),
            (13, "Q3_K_L"),
            (14, "Q4_K_S"),
            (15, "Q4_K_M"),
            (16, "Q5_K_S"),
            (17, "Q5_K_M"),
            (18, "Q6_K"),
            (19, "IQ2_XXS"),
            (20, "IQ2_XS"),
            (21, "Q2_K_S"),
            (22, "IQ3_XS"),
            (23, "IQ3_XXS"),
            (24, "IQ1_S"),
            (25, "IQ4_NL"),
            (26, "IQ3_S"),
            (27, "IQ3_M"),
            (28, "IQ2_S"),
            (29, "IQ2_M"),
            (30, "IQ4_XS"),
            (31, "IQ1_M"),
            (32, "BF16"),
            (36, "TQ1_0"),
            (37, "TQ2_0"),
            (38, "MXFP4_MOE"),
            (39, "NVFP4"),
            (40, "Q1_0"),
            (41, "Q2_0"),
            (1024, "GUESSED"),
        ];
        NAMES
            .iter()
            .find(|(ft, _)| *ft == file_type)
            .map(|(_, name)| *name)
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

    #[test]
    fn file_type_names_are_llama_cpps() {
        for t in QuantType::ALL {
            let name = QuantType::file_type_name(t.file_type()).unwrap();
            assert_eq!(name.to_lowercase(), t.name(), "{t}");
        }
        assert_eq!(QuantType::file_type_name(19), Some("IQ2_XXS"));
        assert_eq!(QuantType::file_type_name(37), Some("TQ2_0"));
        assert_eq!(QuantType::file_type_name(4), None, "removed from llama.cpp");
    }
}
