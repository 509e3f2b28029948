//! tempra-tensor: dtypes (including GGUF's quantized block formats), layouts and zero-copy
//! views over refcounted storage, and the [`ExecContext`] facade over the [`Backend`]
//! seam.
//!
//! - [`DType`] and [`quant`]: plain dtypes and GGUF block formats, with scalar reference
//!   quantize/dequantize and dot products that every fast kernel is tested against.
//! - [`Shape`], [`Layout`]: shape, strides in storage units and offset, stored inline.
//! - [`Storage`], [`Tensor`]: refcounted memory (pooled, owned, mapped, static, device,
//!   a backend's [`PreparedStorage`]) and cheap views over it.
//! - [`ExecContext`]: validates ops, takes outputs from the backend's pool, calls the
//!   [`Backend`]; [`ReferenceBackend`] is the scalar specification of every op.
//! - [`compare::nmse`]: the one error metric cross-backend comparisons use;
//!   [`Backend::handoffs`]: the calls a backend handed to another implementation.

pub mod attention;
pub mod backend;
pub mod compare;
pub mod context;
pub mod dtype;
pub mod element;
pub mod error;
pub mod handoff;
pub mod layout;
pub mod op_kinds;
pub mod ordering;
pub mod prepared;
pub mod quant;
pub mod random;
pub mod reference;
pub mod rope;
pub mod shape;
pub mod storage;
pub mod tensor;
mod tensor_display;

pub use attention::AttentionParams;
pub use backend::Backend;
pub use context::ExecContext;
pub use dtype::DType;
pub use element::Element;
pub use error::{Result, TensorError};
pub use half;
pub use handoff::{HandoffCounter, Handoffs};
pub use layout::{Layout, Runs, StridedIndex, broadcast_shapes};
pub use op_kinds::{BinaryOp, ReduceOp, UnaryOp};
pub use prepared::PreparedStorage;
pub use reference::ReferenceBackend;
pub use rope::{RopeConfig, RopeScaling, RopeStyle};
pub use shape::{MAX_RANK, Shape};
pub use storage::{DeviceStorage, MappedBytes, Storage};
pub use tempra_pool;
pub use tensor::Tensor;
