//! The crate's error type.

use tempra_tensor::TensorError;

/// Everything the GPU backend can refuse or fail at.
///
/// [`GpuError::NoAdapter`] is the one callers usually match on: it means "no usable GPU
/// here", and the caller falls back to the CPU backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No adapter matched the request (none present, or none whose name contains the
    /// `TEMPRA_GPU_ADAPTER` / [`crate::GpuOptions::adapter`] substring).
    #[error("no GPU adapter: {reason}")]
    NoAdapter {
        /// Why, including the adapters that were seen.
        reason: String,
    },
    /// The adapter exists but cannot run tempra's kernels (a limit below what they need).
    #[error("GPU adapter {adapter} is not usable: {reason}")]
    UnsuitableAdapter {
        /// The adapter's name.
        adapter: String,
        /// What it lacks.
        reason: String,
    },
    /// `request_device` failed.
    #[error("GPU adapter {adapter}: creating the device failed: {message}")]
    RequestDevice {
        /// The adapter's name.
        adapter: String,
        /// wgpu's message.
        message: String,
    },
    /// The device reported an error (validation, out of memory, device lost) while running
    /// `op`.
    #[error("GPU device error during {op}: {message}")]
    Device {
        /// The operation that observed the error.
        op: &'static str,
        /// wgpu's message.
        message: String,
    },
    /// A shader failed to compile (a bug in tempra: every shader is tested).
    #[error("GPU shader {kernel} failed to compile: {message}")]
    Shader {
        /// The kernel's name.
        kernel: String,
        /// The compiler's message.
        message: String,
    },
    /// A buffer or binding larger than the device allows, in an op that cannot split it
    /// into windows.
    #[error("{op}: {what} needs {bytes} bytes but the device binds at most {limit}")]
    TooLarge {
        /// The op.
        op: &'static str,
        /// The operand.
        what: &'static str,
        /// Bytes needed.
        bytes: u64,
        /// The device's limit.
        limit: u64,
    },
    /// A tensor-level error (bad shape, dtype, id out of range, ...).
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

impl GpuError {
    /// This error as the [`TensorError`] the `Backend` seam returns. Tensor errors pass
    /// through unchanged; device-level errors become [`TensorError::Unsupported`] with the
    /// full message (tempra-tensor has no backend-failure variant).
    pub fn into_tensor_error(self, op: &'static str) -> TensorError {
        match self {
            GpuError::Tensor(e) => e,
            other => TensorError::Unsupported {
                op,
                backend: crate::BACKEND_NAME,
                what: other.to_string(),
            },
        }
    }
}

/// Shorthand for results in this crate.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;
