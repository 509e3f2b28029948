//! The per-format error budgets, in the one metric ([`tempra_tensor::compare::nmse`]),
//! against the f64 oracle.
//!
//! A case names its [`Precision`]: what kind of arithmetic its result goes through. The
//! budget is a property of that kind and of the format that dominates the error, the same
//! for every backend: the reference's own f32 arithmetic, the CPU's SIMD kernels and the
//! GPU's shaders are held to one number. Each budget sits one to two decades above the
//! worst error measured on the reference, CPU (scalar, AVX2, AVX-512) and lavapipe
//! backends (`docs/perf-log.md` has the figures), leaving room for devices' own
//! approximations, and far below the error of a wrong element, block, scale or nibble
//! (of order 1).

use tempra_tensor::DType;

/// The kind of arithmetic a case's result goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Copies, conversions to a format that holds the value, selections, integer results:
    /// every backend must give the oracle's bits.
    Exact,
    /// One f32 rounding per element (add, mul, div, sqrt, ...).
    Rounded,
    /// f32 transcendental functions (exp, log, tanh, erf, sigmoid, ...), which backends
    /// approximate.
    Transcendental,
    /// Sums and dot products accumulated in f32 (reductions, norms, softmax, matmul,
    /// linear over float weights, attention, the training ops).
    Accumulated,
    /// Rope's rotation: sines and cosines of position × frequency, which a device may
    /// evaluate in f32 (an angle of thousands of radians keeps about 4 digits after its
    /// reduction), against the oracle's f64.
    Rotation,
    /// A result stored in a half format (f16 or bf16): the oracle rounds once from f64,
    /// a backend from its f32 result, so the two may differ by one unit in the last place.
    HalfOutput(DType),
    /// Block-format values read back (embedding rows, dequantizing copies): the scale
    /// products may run in f16 on a GPU.
    Dequantized(DType),
    /// `linear` over block-format weights: backends quantize the activations (Q8_0, Q8_1
    /// or Q8_K blocks) and dot in integers, as ggml does.
    QuantizedProduct(DType),
}

impl Precision {
    /// The budget: the largest NMSE a backend's result may have against the oracle.
    pub fn budget(self) -> f64 {
        match self {
            Precision::Exact => 0.0,
            Precision::Rounded => 1e-13,
            Precision::Transcendental => 1e-12,
            Precision::Accumulated => 1e-11,
            Precision::Rotation => 1e-8,
            Precision::HalfOutput(DType::BF16) => 1e-4,
            Precision::HalfOutput(_) => 1e-6,
            Precision::Dequantized(_) => 1e-6,
            Precision::QuantizedProduct(format) => quantized_product_budget(format),
        }
    }

    /// A short name for reports.
    pub fn label(self) -> String {
        match self {
            Precision::Exact => "exact".into(),
            Precision::Rounded => "rounded".into(),
            Precision::Transcendental => "transcendental".into(),
            Precision::Accumulated => "accumulated".into(),
            Precision::Rotation => "rotation".into(),
            Precision::HalfOutput(d) => format!("{d} output"),
            Precision::Dequantized(d) => format!("{d} values"),
            Precision::QuantizedProduct(d) => format!("{d} product"),
        }
    }
}

/// ggml's `test-backend-ops` budget for MUL_MAT is 5e-4 for every weight format. The
/// activation rounding (Q8 blocks of Gaussian inputs) costs about 2e-5 of the output's
/// energy with 32-value blocks (Q8_0, Q8_1) and 5e-5 with 256-value Q8_K blocks, whatever
/// the weights; the budgets keep ggml's margin for the formats paired with Q8_K and one
/// decade for the 32-value ones.
fn quantized_product_budget(format: DType) -> f64 {
    if format.block_len() == 32 { 2e-4 } else { 5e-4 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's budget table says what [`Precision::budget`] returns.
    #[test]
    fn the_readme_table_matches_the_code() {
        let readme = include_str!("../README.md");
        let row = |label: &str| -> f64 {
            let line = readme
                .lines()
                .find(|l| l.starts_with(&format!("| {label} |")))
                .unwrap_or_else(|| panic!("no README row for {label}"));
            let cell = line.split('|').nth(2).unwrap().trim();
            cell.parse()
                .unwrap_or_else(|_| panic!("README budget {cell:?}"))
        };
        let dequantized = "dequantized values (any block format)";
        let small = "product over 32-value weight blocks (q4_0 … q8_0, iq4_nl, mxfp4)";
        let k =
            "product over 256-value weight blocks (q2_K … q6_K, the other I-quants, tq1_0, tq2_0)";
        let expected = [
            ("exact", Precision::Exact),
            ("rounded", Precision::Rounded),
            ("transcendental", Precision::Transcendental),
            ("accumulated", Precision::Accumulated),
            ("rotation", Precision::Rotation),
            ("f16 output", Precision::HalfOutput(DType::F16)),
            ("bf16 output", Precision::HalfOutput(DType::BF16)),
            (dequantized, Precision::Dequantized(DType::Q4K)),
        ];
        for (label, p) in expected {
            assert_eq!(row(label), p.budget(), "{label}");
        }
        for d in crate::cases::WEIGHT_BLOCK_FORMATS {
            assert_eq!(row(dequantized), Precision::Dequantized(d).budget(), "{d}");
            let label = if d.block_len() == 32 { small } else { k };
            assert_eq!(row(label), Precision::QuantizedProduct(d).budget(), "{d}");
        }
    }

    #[test]
    fn budgets_are_ordered_by_how_much_arithmetic_a_result_sees() {
        let order = [
            Precision::Exact,
            Precision::Rounded,
            Precision::Transcendental,
            Precision::Accumulated,
            Precision::Rotation,
            Precision::HalfOutput(DType::F16),
            Precision::QuantizedProduct(DType::Q8_0),
            Precision::QuantizedProduct(DType::Q4K),
        ];
        for pair in order.windows(2) {
            assert!(pair[0].budget() < pair[1].budget(), "{pair:?}");
        }
    }
}
