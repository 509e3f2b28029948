//! The crate's error type.

use std::path::PathBuf;

use tempra_tensor::{Shape, TensorError};

/// Everything that can go wrong in tempra-autograd. Tensor-level failures (shapes, dtypes,
/// the pool) arrive as [`AutogradError::Tensor`] with the facade's message; the other
/// variants name the graph, parameter or file problem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutogradError {
    /// An op of the tensor facade failed.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// `backward` was called on a value that no variable reaches.
    #[error(
        "backward: the root is a constant (no variable reaches it), so there is nothing to differentiate"
    )]
    NoGraph,
    /// `backward` without a seed needs a one-element root.
    #[error(
        "backward: the root has shape {shape}; pass a seed gradient for a root of more than one element"
    )]
    NotScalar {
        /// The root's shape.
        shape: Shape,
    },
    /// A seed gradient of the wrong shape or dtype.
    #[error("backward: the seed gradient {seed} does not match the root {root}")]
    SeedShape {
        /// The root's shape.
        root: Shape,
        /// The seed's shape.
        seed: Shape,
    },
    /// A node whose saved tensors an earlier `backward` already released.
    #[error(
        "backward: the graph through `{op}` was already consumed by an earlier backward (rebuild it with a new forward)"
    )]
    GraphConsumed {
        /// The op whose backward rule is gone.
        op: &'static str,
    },
    /// A variable input that the op has no gradient for (e.g. a quantized weight).
    #[error("{op}: cannot differentiate with respect to {what}")]
    NotDifferentiable {
        /// The op.
        op: &'static str,
        /// The input and why.
        what: String,
    },
    /// A backward rule produced a gradient that does not reduce to its input's shape.
    #[error(
        "backward of {op}: gradient of shape {got} does not reduce to the input's shape {expected}"
    )]
    GradientShape {
        /// The op whose rule produced it.
        op: &'static str,
        /// The input's shape.
        expected: Shape,
        /// The gradient's shape.
        got: Shape,
    },
    /// A bad argument to an autograd-level function (optimizer settings, gradcheck inputs).
    #[error("{op}: invalid argument {name}: {reason}")]
    Argument {
        /// The function that checked.
        op: &'static str,
        /// The argument.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A parameter-store problem (duplicate or unknown name, shape or dtype change).
    #[error("parameter `{name}`: {reason}")]
    Parameter {
        /// The parameter's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A safetensors file that does not follow the format.
    #[error("{path}: not a valid safetensors file: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
    /// An analytic gradient that disagrees with central finite differences.
    #[error(
        "gradcheck: input {input}, element {index}: analytic {analytic:e} vs numeric {numeric:e} \
         (|diff| {abs_error:e} > atol + rtol·|numeric|)"
    )]
    Gradcheck {
        /// Which input (position in the input list).
        input: usize,
        /// Row-major element index within that input.
        index: usize,
        /// The gradient from backward.
        analytic: f64,
        /// The finite-difference estimate.
        numeric: f64,
        /// Their absolute difference.
        abs_error: f64,
    },
}

/// Shorthand for results in this crate.
pub type Result<T, E = AutogradError> = std::result::Result<T, E>;
