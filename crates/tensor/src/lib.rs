//! tempra-tensor: dtypes (including GGUF's quantized block formats), layouts and zero-copy
//! views over refcounted storage, and the `ExecContext` facade over the `Backend` seam.

pub mod dtype;
pub mod error;
pub mod shape;

pub use dtype::DType;
pub use error::{Result, TensorError};
pub use shape::{MAX_RANK, Shape};
