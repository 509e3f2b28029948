//! Reductions along a dim, argmax, softmax and log-softmax.

use crate::context::{COMPUTE_FLOATS, ExecContext, check_output, expect_dtype};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::op_kinds::ReduceOp;
use crate::shape::Shape;
use crate::tensor::Tensor;

/// `x`'s shape with `dim` set to 1, after checking `dim` (and that it is not empty).
/// Sum and mean accept an empty dim (giving 0 and NaN, as numpy does); max, min and argmax
/// do not.
fn reduced_shape(op: &'static str, x: &Tensor, dim: usize) -> Result<Shape> {
    let rank = x.rank();
    if dim >= rank {
        return Err(TensorError::DimOutOfRange { op, dim, rank });
    }
    if x.dims()[dim] == 0 && !matches!(op, "sum" | "mean") {
        return Err(TensorError::View {
            op,
            shape: *x.shape(),
            reason: "cannot reduce an empty dim",
        });
    }
    let mut shape = *x.shape();
    shape.dims_mut()[dim] = 1;
    Ok(shape)
}

/// Drops `dim` from a keepdim result unless `keepdim`.
fn finish(out: Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
    if keepdim { Ok(out) } else { out.squeeze(dim) }
}

impl ExecContext {
    /// Reduces `x` along `dim` (F32 or F64); keeps that dim as size 1 when `keepdim`.
    pub fn reduce(&self, op: ReduceOp, x: &Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
        expect_dtype(op.name(), x, COMPUTE_FLOATS, "f32 or f64")?;
        let shape = reduced_shape(op.name(), x, dim)?;
        let mut out = self.alloc(op.name(), shape, x.dtype())?;
        self.backend.reduce(op, x, dim, &mut out)?;
        finish(out, dim, keepdim)
    }

    /// [`Self::reduce`] with `keepdim` into `out` (`x`'s shape with `dim` of 1, x's
    /// dtype; see the output rule of [`crate::Backend`]): a router's weight sums in a step
    /// arena.
    pub fn reduce_into(
        &self,
        op: ReduceOp,
        x: &Tensor,
        dim: usize,
        out: &mut Tensor,
    ) -> Result<()> {
        expect_dtype(op.name(), x, COMPUTE_FLOATS, "f32 or f64")?;
        let shape = reduced_shape(op.name(), x, dim)?;
        check_output(op.name(), out, &shape, x.dtype(), &[x])?;
        self.backend.reduce(op, x, dim, out)
    }

    /// Σ along `dim`.
    pub fn sum(&self, x: &Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, x, dim, keepdim)
    }

    /// Mean along `dim`.
    pub fn mean(&self, x: &Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, x, dim, keepdim)
    }

    /// Maximum along `dim`.
    pub fn max(&self, x: &Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, x, dim, keepdim)
    }

    /// Minimum along `dim`.
    pub fn min(&self, x: &Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, x, dim, keepdim)
    }

    /// Σ of every element, as a rank-0 tensor.
    pub fn sum_all(&self, x: &Tensor) -> Result<Tensor> {
        let flat = self.contiguous(x)?.reshape(&[x.elem_count()])?;
        self.sum(&flat, 0, false)
    }

    /// Index of the maximum along `dim` (the first on ties) as U32.
    pub fn argmax(&self, x: &Tensor, dim: usize, keepdim: bool) -> Result<Tensor> {
        expect_dtype("argmax", x, COMPUTE_FLOATS, "f32 or f64")?;
        let shape = reduced_shape("argmax", x, dim)?;
        let mut out = self.alloc("argmax", shape, DType::U32)?;
        self.backend.argmax(x, dim, &mut out)?;
        finish(out, dim, keepdim)
    }

    /// Softmax along the last dim.
    pub fn softmax(&self, x: &Tensor) -> Result<Tensor> {
        self.softmax_impl("softmax", x, false)
    }

    /// [`Self::softmax`] into `out` (x's shape and dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn softmax_into(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        const OP: &str = "softmax";
        softmax_input(OP, x)?;
        check_output(OP, out, x.shape(), x.dtype(), &[x])?;
        self.backend.softmax(x, false, out)
    }

    /// Log-softmax along the last dim.
    pub fn log_softmax(&self, x: &Tensor) -> Result<Tensor> {
        self.softmax_impl("log_softmax", x, true)
    }

    fn softmax_impl(&self, op: &'static str, x: &Tensor, log: bool) -> Result<Tensor> {
        softmax_input(op, x)?;
        let mut out = self.alloc(op, *x.shape(), x.dtype())?;
        self.backend.softmax(x, log, &mut out)?;
        Ok(out)
    }
}

/// Checks a softmax input: F32 or F64 with a non-empty last dim.
fn softmax_input(op: &'static str, x: &Tensor) -> Result<()> {
    expect_dtype(op, x, COMPUTE_FLOATS, "f32 or f64")?;
    if x.rank() == 0 || x.shape().last() == 0 {
        return Err(TensorError::View {
            op,
            shape: *x.shape(),
            reason: "needs a non-empty last dim",
        });
    }
    Ok(())
}
