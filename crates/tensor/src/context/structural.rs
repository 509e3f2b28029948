//! Copies: contiguous, cast, quantize, concat, and writes into a region of a tensor.

use crate::context::{ExecContext, rename_op};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::Shape;
use crate::tensor::Tensor;

impl ExecContext {
    /// `x` itself when contiguous (a cheap clone), else a contiguous copy.
    pub fn contiguous(&self, x: &Tensor) -> Result<Tensor> {
        if x.is_contiguous() {
            return Ok(x.clone());
        }
        let mut out = self.alloc("contiguous", *x.shape(), x.dtype())?;
        self.backend.copy(x, &mut out)?;
        Ok(out)
    }

    /// A contiguous copy of `x` converted to `dtype` (between plain dtypes; a block dtype
    /// casts to a float by dequantizing; use [`Self::quantize`] to make a block dtype).
    pub fn cast(&self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        if dtype.is_quantized() {
            return Err(TensorError::DType {
                op: "cast",
                dtype,
                what: "a plain dtype (use quantize)",
            });
        }
        if x.dtype().is_quantized() && !dtype.is_float() {
            return Err(TensorError::DType {
                op: "cast",
                dtype,
                what: "a float to dequantize into",
            });
        }
        let mut out = self.alloc("cast", *x.shape(), dtype)?;
        self.backend.copy(x, &mut out)?;
        Ok(out)
    }

    /// `x` (F32, last dim a multiple of the block length) quantized to block `dtype`.
    pub fn quantize(&self, x: &Tensor, dtype: DType) -> Result<Tensor> {
        const OP: &str = "quantize";
        if x.dtype() != DType::F32 {
            return Err(TensorError::DType {
                op: OP,
                dtype: x.dtype(),
                what: "f32 input",
            });
        }
        if !dtype.is_quantized() {
            return Err(TensorError::DType {
                op: OP,
                dtype,
                what: "a block format",
            });
        }
        let mut out = self.alloc(OP, *x.shape(), dtype)?;
        let x = self.contiguous(x)?;
        self.backend.quantize(&x, &mut out)?;
        Ok(out)
    }

    /// Joins `parts` along `dim`; all must share dtype, rank and every other dim.
    pub fn concat(&self, parts: &[&Tensor], dim: usize) -> Result<Tensor> {
        const OP: &str = "concat";
        let first = parts.first().ok_or_else(|| TensorError::Argument {
            op: OP,
            name: "parts",
            reason: "needs at least one tensor".into(),
        })?;
        let rank = first.rank();
        if dim >= rank {
            return Err(TensorError::DimOutOfRange { op: OP, dim, rank });
        }
        let mut total = 0usize;
        for part in parts {
            if part.dtype() != first.dtype() {
                return Err(TensorError::DTypeMismatch {
                    op: OP,
                    lhs: first.dtype(),
                    rhs: part.dtype(),
                });
            }
            let same_others = part.rank() == rank
                && (0..rank).all(|d| d == dim || part.dims()[d] == first.dims()[d]);
            if !same_others {
                return Err(TensorError::ShapeMismatch {
                    op: OP,
                    lhs: *first.shape(),
                    rhs: *part.shape(),
                });
            }
            total = total
                .checked_add(part.dims()[dim])
                .ok_or(TensorError::Overflow {
                    op: OP,
                    shape: *part.shape(),
                })?;
        }
        let mut shape = *first.shape();
        shape.dims_mut()[dim] = total;
        let mut out = self.alloc(OP, shape, first.dtype())?;
        let mut start = 0;
        for part in parts {
            let len = part.dims()[dim];
            self.copy_into_region(part, &mut out, dim, start)
                .map_err(|e| rename_op(e, OP))?;
            start += len;
        }
        Ok(out)
    }

    /// `t` in host memory: `t` itself (a view, no copy) when it is already there, else
    /// a contiguous host copy of its elements read back from the device (an engine's
    /// logits for the sampler).
    pub fn to_host(&self, t: &Tensor) -> Result<Tensor> {
        if t.storage().is_host() {
            return Ok(t.clone());
        }
        let dense = if t.is_contiguous() {
            t.clone()
        } else {
            self.contiguous(t)?
        };
        let layout = crate::Layout::contiguous(*dense.shape(), dense.dtype())?;
        let mut storage = crate::Storage::owned_zeroed(layout.bytes_spanned())?;
        let start = dense.layout().offset() * dense.dtype().block_bytes();
        let len = layout.bytes_spanned();
        if len > 0 {
            let dst = &mut storage.host_bytes_mut()?[..len];
            dense.storage().read_bytes(start, dst)?;
        }
        Tensor::from_storage(storage, layout)
    }

    /// Writes `src` into `dst` at `start..start + src.dims()[dim]` along `dim` (e.g. new
    /// K/V rows into a session's cache). `dst` must be its storage's only holder and
    /// writable; `src` must match `dst`'s other dims (its dtype is converted).
    pub fn write_slice(
        &self,
        dst: &mut Tensor,
        dim: usize,
        start: usize,
        src: &Tensor,
    ) -> Result<()> {
        const OP: &str = "write_slice";
        if src.rank() != dst.rank() || dim >= dst.rank() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *dst.shape(),
                rhs: *src.shape(),
            });
        }
        let others_match = (0..dst.rank()).all(|d| d == dim || src.dims()[d] == dst.dims()[d]);
        if !others_match {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *dst.shape(),
                rhs: *src.shape(),
            });
        }
        if !dst.is_unique() {
            return Err(TensorError::Argument {
                op: OP,
                name: "dst",
                reason: "its storage is shared by other tensors; writes need unique storage".into(),
            });
        }
        self.copy_into_region(src, dst, dim, start)
            .map_err(|e| rename_op(e, OP))
    }

    /// Copies `src` into the region `start..` along `dim` of uniquely held `dst`.
    fn copy_into_region(
        &self,
        src: &Tensor,
        dst: &mut Tensor,
        dim: usize,
        start: usize,
    ) -> Result<()> {
        let len = src.dims()[dim];
        let region = dst.layout().narrow(dim, start, len)?;
        if *region.shape() != *src.shape() {
            return Err(TensorError::ShapeMismatch {
                op: "copy",
                lhs: Shape::new(region.dims())?,
                rhs: *src.shape(),
            });
        }
        let full = dst.replace_layout(region);
        let result = self.backend.copy(src, dst);
        dst.replace_layout(full);
        result
    }
}
