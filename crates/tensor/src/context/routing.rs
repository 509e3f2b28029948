//! The routing ops of a mixture of experts: `top_k` (the chosen experts and their
//! scores), `gather` along the last dim (a router's probabilities at the chosen
//! experts) and `weighted_sum` over slots (the experts' outputs combined per token).
//! Rows of activations are gathered by [`ExecContext::embedding`], whose table may be
//! any `[V, D]` tensor.

use crate::context::{
    COMPUTE_FLOATS, Dest, ExecContext, check_output, expect_dtype, fresh, shape_for,
};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::StridedIndex;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::Tensor;

/// `dims` with its last dim set to `last`, as a shape attributed to `op`.
fn with_last(op: &'static str, dims: &[usize], last: usize) -> Result<Shape> {
    let mut out = [0usize; MAX_RANK];
    out[..dims.len()].copy_from_slice(dims);
    out[dims.len() - 1] = last;
    shape_for(op, &out[..dims.len()])
}

/// The first U32 of host `ids` that is not below `bound`, as `(position, id)` (row-major
/// position in `ids`); `None` when all are in range, or when `ids` is not host memory
/// (device ids are the kernel's to guard).
pub(crate) fn first_out_of_range(ids: &Tensor, bound: usize) -> Result<Option<(usize, u32)>> {
    if !ids.storage().is_host() {
        return Ok(None);
    }
    let bytes = ids.storage().host_bytes()?;
    for (position, unit) in StridedIndex::new(ids.layout()).enumerate() {
        let id: u32 = bytemuck::pod_read_unaligned(&bytes[unit * 4..unit * 4 + 4]);
        if id as usize >= bound {
            return Ok(Some((position, id)));
        }
    }
    Ok(None)
}

impl ExecContext {
    /// The `k` largest values along the last dim of `x [.., N]` (F32 or F64, `k ≤ N`),
    /// in descending order, and their indices: `(values [.., k]` of x's dtype,
    /// `indices [.., k]` U32`)`. NaN ranks above every number; equal values (and NaNs)
    /// come by the lower index first ([`crate::ordering::ranks_above`]), so the choice is
    /// the same on every backend. The indices have no gradient (autograd returns them as
    /// a constant).
    pub fn top_k(&self, x: &Tensor, k: usize) -> Result<(Tensor, Tensor)> {
        const OP: &str = "top_k";
        let shape = top_k_shape(x, k)?;
        let mut values = self.alloc(OP, shape, x.dtype())?;
        let mut indices = self.alloc(OP, shape, DType::U32)?;
        self.backend.top_k(x, &mut values, &mut indices)?;
        Ok((values, indices))
    }

    /// [`Self::top_k`] into `values` and `indices` (`[.., k]` of x's dtype and U32; see
    /// the output rule of [`crate::Backend`]).
    pub fn top_k_into(
        &self,
        x: &Tensor,
        k: usize,
        values: &mut Tensor,
        indices: &mut Tensor,
    ) -> Result<()> {
        const OP: &str = "top_k";
        let shape = top_k_shape(x, k)?;
        check_output(OP, values, &shape, x.dtype(), &[x])?;
        check_output(OP, indices, &shape, DType::U32, &[x, values])?;
        self.backend.top_k(x, values, indices)
    }

    /// `x [.., N]` at U32 `indices [.., k]` along the last dim → `[.., k]` of x's dtype
    /// (F32 or F64): torch's `gather(x, -1, indices)`, e.g. a router's probabilities at
    /// the experts `top_k` chose by other scores. `indices` has x's leading dims; an
    /// index ≥ N in host memory is an error naming it.
    pub fn gather(&self, x: &Tensor, indices: &Tensor) -> Result<Tensor> {
        fresh("gather", self.gather_to(x, indices, Dest::Pool))
    }

    /// [`Self::gather`] into `out` (`[.., k]` of x's dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn gather_into(&self, x: &Tensor, indices: &Tensor, out: &mut Tensor) -> Result<()> {
        self.gather_to(x, indices, Dest::Into(out)).map(drop)
    }

    fn gather_to(&self, x: &Tensor, indices: &Tensor, dest: Dest<'_>) -> Result<Option<Tensor>> {
        const OP: &str = "gather";
        expect_dtype(OP, x, COMPUTE_FLOATS, "f32 or f64")?;
        expect_dtype(OP, indices, &[DType::U32], "u32 indices")?;
        let r = x.rank();
        if r == 0 || indices.rank() != r || x.dims()[..r - 1] != indices.dims()[..r - 1] {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *x.shape(),
                rhs: *indices.shape(),
            });
        }
        let n = x.shape().last();
        if let Some((position, index)) = first_out_of_range(indices, n)? {
            return Err(TensorError::Argument {
                op: OP,
                name: "indices",
                reason: format!(
                    "index {index} at position {position} is out of range for a last dim of {n}"
                ),
            });
        }
        let shape = *indices.shape();
        self.run_op(OP, shape, x.dtype(), dest, &[x, indices], |b, out| {
            b.gather(x, indices, out)
        })
    }

    /// `Σ_s weights[.., s] · x[.., s, :]` over `x [.., k, D]` and `weights [.., k]` (one
    /// dtype, F32 or F64) → `[.., D]`, summed in slot order `s = 0, 1, …, k − 1`: a token's
    /// experts' outputs combined with its routing weights, the same bits however the
    /// tokens are batched.
    pub fn weighted_sum(&self, x: &Tensor, weights: &Tensor) -> Result<Tensor> {
        fresh("weighted_sum", self.weighted_sum_to(x, weights, Dest::Pool))
    }

    /// [`Self::weighted_sum`] into `out` (`[.., D]` of x's dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn weighted_sum_into(&self, x: &Tensor, weights: &Tensor, out: &mut Tensor) -> Result<()> {
        self.weighted_sum_to(x, weights, Dest::Into(out)).map(drop)
    }

    fn weighted_sum_to(
        &self,
        x: &Tensor,
        weights: &Tensor,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        const OP: &str = "weighted_sum";
        expect_dtype(OP, x, COMPUTE_FLOATS, "f32 or f64")?;
        if weights.dtype() != x.dtype() {
            return Err(TensorError::DTypeMismatch {
                op: OP,
                lhs: x.dtype(),
                rhs: weights.dtype(),
            });
        }
        let r = x.rank();
        if r < 2 {
            return Err(TensorError::Rank {
                op: OP,
                rank: r,
                what: "at least 2: [.., k, D]",
            });
        }
        if weights.dims() != &x.dims()[..r - 1] {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *x.shape(),
                rhs: *weights.shape(),
            });
        }
        let mut dims = [0usize; MAX_RANK];
        dims[..r - 2].copy_from_slice(&x.dims()[..r - 2]);
        dims[r - 2] = x.shape().last();
        let shape = shape_for(OP, &dims[..r - 1])?;
        self.run_op(OP, shape, x.dtype(), dest, &[x, weights], |b, out| {
            b.weighted_sum(x, weights, out)
        })
    }
}

/// Checks `top_k`'s input and returns the shape of its outputs.
fn top_k_shape(x: &Tensor, k: usize) -> Result<Shape> {
    const OP: &str = "top_k";
    expect_dtype(OP, x, COMPUTE_FLOATS, "f32 or f64")?;
    if x.rank() == 0 {
        return Err(TensorError::Rank {
            op: OP,
            rank: 0,
            what: "at least 1",
        });
    }
    let n = x.shape().last();
    if k > n {
        return Err(TensorError::Argument {
            op: OP,
            name: "k",
            reason: format!("{k} exceeds the last dim of {}", x.shape()),
        });
    }
    with_last(OP, x.dims(), k)
}
