//! Tensor descriptions: [`TensorSpec`] (what a writer is asked to store) and
//! [`TensorInfo`] (where a reader found it).

use tempra_tensor::{DType, Shape};

/// A tensor's name, shape and dtype: what a writer needs to lay out a file.
///
/// `shape` is tempra's row-major shape (last dim fastest). GGUF lists dims innermost
/// first (`ne[0]` is the row length); [`TensorSpec::gguf_dims`] gives that order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The tensor name (`blk.0.attn_q.weight`).
    pub name: String,
    /// The row-major shape.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// A spec from its parts.
    pub fn new(name: impl Into<String>, shape: Shape, dtype: DType) -> Self {
        Self {
            name: name.into(),
            shape,
            dtype,
        }
    }

    /// The dims in GGUF order (innermost first).
    pub fn gguf_dims(&self) -> Vec<u64> {
        self.shape.dims().iter().rev().map(|&d| d as u64).collect()
    }

    /// The number of elements.
    pub fn elem_count(&self) -> usize {
        self.shape.elem_count()
    }

    /// The bytes of the tensor's data, or `None` when the shape does not fit the dtype's
    /// blocks or the size overflows.
    pub fn byte_len(&self) -> Option<usize> {
        let elems = self.shape.checked_elem_count()?;
        if self.dtype.is_quantized() && !self.shape.last().is_multiple_of(self.dtype.block_len()) {
            return None;
        }
        self.dtype.bytes_for(elems)
    }

    /// The row length (the last dim; 1 for a rank-0 shape).
    pub fn row_len(&self) -> usize {
        self.shape.last()
    }
}

/// A tensor found in a model file: its spec plus where its bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Name, row-major shape and dtype.
    pub spec: TensorSpec,
    /// Absolute byte offset of the data in the file.
    pub offset: u64,
    /// Length of the data in bytes.
    pub byte_len: u64,
}

impl TensorInfo {
    /// The tensor name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The row-major shape.
    pub fn shape(&self) -> &Shape {
        &self.spec.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.spec.dtype
    }
}
