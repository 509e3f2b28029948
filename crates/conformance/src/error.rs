//! The crate's error type.

use tempra_tensor::TensorError;

/// What can go wrong while setting up or running the suite (a failed comparison is not
/// an error: it is a row of the [`crate::Report`]).
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    /// A tensor op failed while building a case's inputs or its f64 oracle.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// A backend could not be made (no GPU adapter, an ISA this CPU lacks, ...).
    #[error("backend {backend}: {reason}")]
    Backend {
        /// The backend asked for.
        backend: String,
        /// Why it could not be made.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, ConformanceError>;
