//! Ops that exist for training: embedding scatter-add, one-hot, fused cross-entropy and
//! its gradient, and the attention gradient.

use crate::attention::AttentionParams;
use crate::context::{COMPUTE_FLOATS, ExecContext, expect_dtype, shape_for};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::Shape;
use crate::tensor::Tensor;

/// Checks `logits [.., V]` against U32 `targets [..]`.
fn check_logits_targets(op: &'static str, logits: &Tensor, targets: &Tensor) -> Result<Shape> {
    expect_dtype(op, logits, COMPUTE_FLOATS, "f32 or f64 logits")?;
    expect_dtype(op, targets, &[DType::U32], "u32 targets")?;
    let r = logits.rank();
    if r == 0 || logits.dims()[..r - 1] != *targets.dims() || logits.shape().last() == 0 {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: *logits.shape(),
            rhs: *targets.shape(),
        });
    }
    Ok(*targets.shape())
}

impl ExecContext {
    /// The table gradient of [`Self::embedding`]: `[vocab, D]`, accumulating `grad [.., D]`
    /// rows at U32 `ids [..]`. An id ≥ vocab is an error.
    pub fn embedding_backward(&self, ids: &Tensor, grad: &Tensor, vocab: usize) -> Result<Tensor> {
        const OP: &str = "embedding_backward";
        expect_dtype(OP, ids, &[DType::U32], "u32 ids")?;
        expect_dtype(OP, grad, COMPUTE_FLOATS, "f32 or f64 gradient")?;
        let r = grad.rank();
        if r == 0 || grad.dims()[..r - 1] != *ids.dims() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *ids.shape(),
                rhs: *grad.shape(),
            });
        }
        let mut out = self.alloc(OP, Shape::new(&[vocab, grad.shape().last()])?, grad.dtype())?;
        self.backend.embedding_backward(ids, grad, &mut out)?;
        Ok(out)
    }

    /// `[.., depth]` of `dtype` (F32/F64) with 1 at each U32 id. An id ≥ depth is an error.
    pub fn one_hot(&self, ids: &Tensor, depth: usize, dtype: DType) -> Result<Tensor> {
        const OP: &str = "one_hot";
        expect_dtype(OP, ids, &[DType::U32], "u32 ids")?;
        if !COMPUTE_FLOATS.contains(&dtype) {
            return Err(TensorError::DType {
                op: OP,
                dtype,
                what: "f32 or f64 output",
            });
        }
        let mut dims = ids.dims().to_vec();
        dims.push(depth);
        let mut out = self.alloc(OP, shape_for(OP, &dims)?, dtype)?;
        self.backend.one_hot(ids, &mut out)?;
        Ok(out)
    }

    /// Per-row cross-entropy (fused log-softmax + NLL) of `logits [.., V]` against U32
    /// `targets [..]` → `[..]`; rows whose target equals `ignore_index` give 0. A target
    /// ≥ V (not ignored) is an error.
    pub fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
    ) -> Result<Tensor> {
        const OP: &str = "cross_entropy";
        let shape = check_logits_targets(OP, logits, targets)?;
        let mut out = self.alloc(OP, shape, logits.dtype())?;
        self.backend
            .cross_entropy(logits, targets, ignore_index, &mut out)?;
        Ok(out)
    }

    /// The logits gradient of [`Self::cross_entropy`] given per-row `grad [..]`.
    pub fn cross_entropy_backward(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        grad: &Tensor,
    ) -> Result<Tensor> {
        const OP: &str = "cross_entropy_backward";
        let shape = check_logits_targets(OP, logits, targets)?;
        if *grad.shape() != shape || grad.dtype() != logits.dtype() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: shape,
                rhs: *grad.shape(),
            });
        }
        let mut out = self.alloc(OP, *logits.shape(), logits.dtype())?;
        self.backend
            .cross_entropy_backward(logits, targets, ignore_index, grad, &mut out)?;
        Ok(out)
    }

    /// The gradients `(dq, dk, dv)` of [`Self::attention`] given `grad` shaped as its
    /// output; all of q's dtype.
    pub fn attention_backward(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        params: &AttentionParams,
        grad: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        const OP: &str = "attention_backward";
        // The forward's checks, on the same inputs.
        let out_shape = self.attention_shape(q, k, v, params)?;
        if *grad.shape() != out_shape || grad.dtype() != q.dtype() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: out_shape,
                rhs: *grad.shape(),
            });
        }
        let dtype = q.dtype();
        let mut dq = self.alloc(OP, *q.shape(), dtype)?;
        let mut dk = self.alloc(OP, *k.shape(), dtype)?;
        let mut dv = self.alloc(OP, *v.shape(), dtype)?;
        self.backend
            .attention_backward(q, k, v, params, grad, &mut dq, &mut dk, &mut dv)?;
        Ok((dq, dk, dv))
    }
}
