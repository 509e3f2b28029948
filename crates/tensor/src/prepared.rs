//! [`PreparedStorage`]: a backend's private copy of a weight, in a layout only that
//! backend's kernels read (the CPU's rows interleaved by eight). The tensor over it keeps
//! the dtype of the file it came from (`q4_0`, `q4_K`, ...): [`crate::DType`] holds the
//! formats of files and tensors only, as ggml keeps its repacked layouts in a CPU buffer
//! type outside `ggml_type`.
//!
//! Made by [`crate::Backend::prepare_weight`]. The owning backend's `linear` reads the
//! layout through [`PreparedStorage::as_any`]. Everything else reads the tensor through
//! [`crate::Storage::read_bytes`], which restores the bytes of the dtype's own layout (the
//! reference backend, a GPU upload, `to_vec_f32`): the same values, at the cost of the
//! conversion on every read. [`crate::Storage::host_bytes`] refuses it with
//! [`crate::TensorError::Prepared`], so no code can take the prepared bytes for the
//! file's.

use std::any::Any;
use std::fmt;

use crate::error::Result;

/// A weight in a backend-owned layout, type-erased so this crate never names it.
pub trait PreparedStorage: Send + Sync + fmt::Debug + 'static {
    /// The name of the backend whose kernels read this layout (e.g. `"cpu"`).
    fn backend_name(&self) -> &'static str;
    /// The layout's name, for messages and tests (e.g. `"q4_0_r8"`).
    fn layout_name(&self) -> &'static str;
    /// The bytes of the tensor in its dtype's own layout: what [`Self::read_bytes`]
    /// serves, and what a [`crate::Layout`] over this storage addresses.
    fn byte_len(&self) -> usize;
    /// The bytes the prepared copy occupies in memory.
    fn resident_bytes(&self) -> usize;
    /// Copies `dst.len()` bytes of the dtype's own layout, starting at byte `offset`,
    /// into `dst`: the prepared layout converted back.
    fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// The concrete type, for the owning backend's kernels.
    fn as_any(&self) -> &dyn Any;
}
