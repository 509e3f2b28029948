//! The crate's error type.

use crate::dtype::DType;
use crate::shape::Shape;

/// Everything that can go wrong in tempra-tensor. Each variant names the op and the
/// shapes, dtypes, dim or index at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    /// Two shapes that an op needs to agree do not.
    #[error("{op}: shape mismatch between {lhs} and {rhs}")]
    ShapeMismatch {
        /// The op that checked.
        op: &'static str,
        /// The first shape.
        lhs: Shape,
        /// The second shape.
        rhs: Shape,
    },
    /// Shapes cannot be broadcast together.
    #[error("{op}: cannot broadcast {lhs} with {rhs}")]
    Broadcast {
        /// The op that checked.
        op: &'static str,
        /// The first shape.
        lhs: Shape,
        /// The second shape.
        rhs: Shape,
    },
    /// A dtype the op does not accept here.
    #[error("{op}: unsupported dtype {dtype} ({what})")]
    DType {
        /// The op that checked.
        op: &'static str,
        /// The dtype found.
        dtype: DType,
        /// What was expected.
        what: &'static str,
    },
    /// Two dtypes that must agree do not.
    #[error("{op}: dtype mismatch {lhs} vs {rhs}")]
    DTypeMismatch {
        /// The op that checked.
        op: &'static str,
        /// The first dtype.
        lhs: DType,
        /// The second dtype.
        rhs: DType,
    },
    /// A dimension index out of range for the tensor's rank.
    #[error("{op}: dim {dim} out of range for rank {rank}")]
    DimOutOfRange {
        /// The op that checked.
        op: &'static str,
        /// The dim asked for.
        dim: usize,
        /// The tensor's rank.
        rank: usize,
    },
    /// A rank above [`crate::layout::MAX_RANK`], or the wrong rank for an op.
    #[error("{op}: rank {rank} not allowed ({what})")]
    Rank {
        /// The op that checked.
        op: &'static str,
        /// The rank found.
        rank: usize,
        /// What was expected.
        what: &'static str,
    },
    /// A range or index outside a dimension.
    #[error("{op}: range {start}..{end} out of bounds for dim {dim} of size {size}")]
    OutOfBounds {
        /// The op that checked.
        op: &'static str,
        /// The dim.
        dim: usize,
        /// Start of the range.
        start: usize,
        /// End of the range (exclusive).
        end: usize,
        /// The dim's size.
        size: usize,
    },
    /// A view that cannot be expressed on this layout (e.g. a reshape of a
    /// non-contiguous tensor, or a narrow that would split a quantization block).
    #[error("{op}: {reason} (shape {shape})")]
    View {
        /// The op that checked.
        op: &'static str,
        /// The shape of the input.
        shape: Shape,
        /// What is wrong.
        reason: &'static str,
    },
    /// An element count or byte size that overflows `usize`.
    #[error("{op}: size overflow for shape {shape}")]
    Overflow {
        /// The op that checked.
        op: &'static str,
        /// The shape at fault.
        shape: Shape,
    },
    /// A data buffer whose length does not match the shape.
    #[error("{op}: got {got} values, shape {shape} needs {expected}")]
    DataLength {
        /// The op that checked.
        op: &'static str,
        /// Values given.
        got: usize,
        /// Values needed.
        expected: usize,
        /// The shape.
        shape: Shape,
    },
    /// An invalid argument value (e.g. a negative epsilon, an index past the vocab).
    #[error("{op}: invalid argument {name}: {reason}")]
    Argument {
        /// The op that checked.
        op: &'static str,
        /// The argument.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The storage lives where this operation cannot reach it (e.g. device memory on the
    /// host path).
    #[error("{op}: storage on {found} but the backend needs {expected}")]
    Device {
        /// The op that checked.
        op: &'static str,
        /// Where the storage is.
        found: &'static str,
        /// Where it must be.
        expected: &'static str,
    },
    /// The bytes of a weight in a backend's prepared layout were asked for as its dtype's
    /// (read it through `Storage::read_bytes`, or use the original tensor).
    #[error(
        "{op}: the weight is in the {backend} backend's prepared layout {layout}, which only \
         that backend's kernels read"
    )]
    Prepared {
        /// The op that asked.
        op: &'static str,
        /// The backend that prepared it.
        backend: &'static str,
        /// The prepared layout.
        layout: &'static str,
    },
    /// The backend does not implement an op for these inputs.
    #[error("{op}: not supported by backend {backend} for {what}")]
    Unsupported {
        /// The op.
        op: &'static str,
        /// The backend's name.
        backend: &'static str,
        /// The dtype or case not supported.
        what: String,
    },
    /// The pool could not supply memory.
    #[error("{op}: {source}")]
    Pool {
        /// The op that needed memory.
        op: &'static str,
        /// The pool's error.
        source: tempra_pool::PoolError,
    },
}

/// Shorthand for results in this crate.
pub type Result<T, E = TensorError> = std::result::Result<T, E>;
