//! GGUF model files: metadata values, the hardened reader, the streaming writer.
//!
//! A GGUF file is a header (magic `GGUF`, version, tensor and key counts), typed
//! key/value metadata, tensor infos (name, dims innermost first, ggml type, offset) and
//! the tensor data, each tensor aligned to `general.alignment` (32 by default).
//!
//! - [`Metadata`], [`Value`], [`Array`], [`ValueType`]: the metadata model.
//! - reading: [`crate::ModelFile::open`] maps a file and parses it, checking every count
//!   and length against [`Limits`] and the file's size (see `reader`).
//! - [`GgufWriter`]: writes metadata and tensor infos, then streams tensor data.
//! - [`keys`]: the metadata key names tempra reads and writes; [`TokenType`]: the
//!   `tokenizer.ggml.token_type` values.

mod cursor;
pub mod keys;
mod limits;
mod metadata;
pub(crate) mod reader;
mod tensor_info;
mod token_type;
mod value;
mod writer;

pub use limits::{Limits, MAX_TENSOR_DIMS};
pub use metadata::Metadata;
pub use tensor_info::{TensorInfo, TensorSpec};
pub use token_type::TokenType;
pub use value::{Array, Value, ValueType};
pub use writer::{GgufWriter, WRITE_VERSION};

/// The first four bytes of every GGUF file.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// The tensor data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The key that sets the tensor data alignment.
pub const KEY_ALIGNMENT: &str = keys::GENERAL_ALIGNMENT;
