//! `ExecContext`: the facade users call. It validates each op, takes the output from the
//! backend's pool and calls the backend through the [`Backend`] seam.

mod creation;
mod elementwise;
mod experts;
mod gradients;
mod linalg;
mod nn;
mod reduction;
mod routing;
mod structural;

pub use nn::KV_DTYPES;

use std::sync::Arc;

use tempra_pool::{HostPool, PoolStats};

use crate::backend::Backend;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::reference::ReferenceBackend;
use crate::shape::Shape;
use crate::tensor::Tensor;

/// The exec layer: a backend (as a trait object, so this type is not generic) and the
/// pool it brings. Cheap to clone.
///
/// ```
/// use tempra_tensor::ExecContext;
///
/// let ctx = ExecContext::reference();
/// let a = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = ctx.from_slice(&[10.0f32, 20.0], &[2])?; // broadcast over rows
/// let c = ctx.add(&a, &b)?;
/// assert_eq!(c.to_vec_f32()?, [11.0, 22.0, 13.0, 24.0]);
/// let y = ctx.matmul(&a, &a.t()?)?; // a transposed view, no copy
/// assert_eq!(y.to_vec_f32()?, [5.0, 11.0, 11.0, 25.0]);
/// # Ok::<(), tempra_tensor::TensorError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ExecContext {
    backend: Arc<dyn Backend>,
}

impl ExecContext {
    /// A context over `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// A context over the scalar [`ReferenceBackend`] with a fresh host pool.
    pub fn reference() -> Self {
        Self::new(Arc::new(ReferenceBackend::new(HostPool::host())))
    }

    /// The backend.
    pub fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    /// The counters of the pool outputs come from.
    pub fn pool_stats(&self) -> PoolStats {
        self.backend.pool_stats()
    }

    /// The calls the backend handed to another implementation so far, per op
    /// ([`Backend::handoffs`]).
    pub fn handoffs(&self) -> crate::Handoffs {
        self.backend.handoffs()
    }

    /// A fresh contiguous output of `shape` and `dtype` from the backend's pool.
    pub(crate) fn alloc(&self, op: &'static str, shape: Shape, dtype: DType) -> Result<Tensor> {
        let layout = Layout::contiguous(shape, dtype).map_err(|e| rename_op(e, op))?;
        let storage = self.backend.allocate(layout.bytes_spanned())?;
        Tensor::from_storage(storage, layout)
    }
}

/// Where an op's output goes: a fresh contiguous block from the backend's pool, or a
/// region the caller supplies (an `*_into` variant: a step arena's slot, a cache row).
pub(crate) enum Dest<'a> {
    /// A fresh output from the pool, returned to the caller.
    Pool,
    /// The caller's output, checked by [`check_output`] before the kernel runs.
    Into(&'a mut Tensor),
}

impl ExecContext {
    /// Runs `kernel` on the output of an op whose inputs are checked: a fresh `shape` ×
    /// `dtype` tensor from the pool (returned as `Some`), or the caller's region after
    /// [`check_output`] (then `None`). `inputs` are what the kernel reads.
    pub(crate) fn run_op(
        &self,
        op: &'static str,
        shape: Shape,
        dtype: DType,
        dest: Dest<'_>,
        inputs: &[&Tensor],
        kernel: impl FnOnce(&dyn Backend, &mut Tensor) -> Result<()>,
    ) -> Result<Option<Tensor>> {
        match dest {
            Dest::Pool => {
                let mut out = self.alloc(op, shape, dtype)?;
                kernel(&*self.backend, &mut out)?;
                Ok(Some(out))
            }
            Dest::Into(out) => {
                check_output(op, out, &shape, dtype, inputs)?;
                kernel(&*self.backend, out)?;
                Ok(None)
            }
        }
    }
}

/// The output of a [`Dest::Pool`] run: always there (the `Option` only says which
/// destination ran).
pub(crate) fn fresh(op: &'static str, out: Result<Option<Tensor>>) -> Result<Tensor> {
    // `ok_or_else`: the message is built (allocated) only on failure, not per op.
    out?.ok_or_else(|| TensorError::Argument {
        op,
        name: "out",
        reason: "no output was produced".into(),
    })
}

/// Checks a caller-supplied output against what the op produces (the output rule of
/// [`Backend`]): of `shape` and `dtype`, contiguous, in writable storage, and exclusively
/// the op's: a host buffer must be held by this tensor alone (kernels write through it),
/// and on any storage no input may view the output's buffer (a device buffer bound for
/// reading and for writing in one dispatch is invalid, even in disjoint ranges).
pub(crate) fn check_output(
    op: &'static str,
    out: &Tensor,
    shape: &Shape,
    dtype: DType,
    inputs: &[&Tensor],
) -> Result<()> {
    if out.shape() != shape {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: *out.shape(),
            rhs: *shape,
        });
    }
    if out.dtype() != dtype {
        return Err(TensorError::DTypeMismatch {
            op,
            lhs: out.dtype(),
            rhs: dtype,
        });
    }
    if !out.is_contiguous() {
        return Err(TensorError::Argument {
            op,
            name: "out",
            reason: format!("must be contiguous ({})", out.layout()),
        });
    }
    match out.storage() {
        crate::Storage::Mapped(_) | crate::Storage::Static(_) | crate::Storage::Prepared(_) => {
            return Err(TensorError::Argument {
                op,
                name: "out",
                reason: format!("{} storage is read-only", out.storage().kind()),
            });
        }
        crate::Storage::Device(_) => {}
        crate::Storage::Pooled(_) | crate::Storage::Owned(_) => {
            if !out.is_unique() {
                return Err(TensorError::Argument {
                    op,
                    name: "out",
                    reason: format!(
                        "its storage is shared by {} tensors; an output must be held by \
                         one tensor alone",
                        out.storage_refs()
                    ),
                });
            }
        }
    }
    if let Some(i) = inputs.iter().position(|input| input.same_storage(out)) {
        return Err(TensorError::Argument {
            op,
            name: "out",
            reason: format!("shares its buffer with input {i}"),
        });
    }
    Ok(())
}

/// Puts `op` into an error raised by a helper on its behalf.
pub(crate) fn rename_op(err: TensorError, new_op: &'static str) -> TensorError {
    use TensorError as E;
    match err {
        E::ShapeMismatch { lhs, rhs, .. } => E::ShapeMismatch {
            op: new_op,
            lhs,
            rhs,
        },
        E::Broadcast { lhs, rhs, .. } => E::Broadcast {
            op: new_op,
            lhs,
            rhs,
        },
        E::DType { dtype, what, .. } => E::DType {
            op: new_op,
            dtype,
            what,
        },
        E::DTypeMismatch { lhs, rhs, .. } => E::DTypeMismatch {
            op: new_op,
            lhs,
            rhs,
        },
        E::DimOutOfRange { dim, rank, .. } => E::DimOutOfRange {
            op: new_op,
            dim,
            rank,
        },
        E::Rank { rank, what, .. } => E::Rank {
            op: new_op,
            rank,
            what,
        },
        E::OutOfBounds {
            dim,
            start,
            end,
            size,
            ..
        } => E::OutOfBounds {
            op: new_op,
            dim,
            start,
            end,
            size,
        },
        E::View { shape, reason, .. } => E::View {
            op: new_op,
            shape,
            reason,
        },
        E::Overflow { shape, .. } => E::Overflow { op: new_op, shape },
        other => other,
    }
}

/// A shape from `dims`, with errors attributed to `op`.
pub(crate) fn shape_for(op: &'static str, dims: &[usize]) -> Result<Shape> {
    Shape::new(dims).map_err(|e| rename_op(e, op))
}

/// Checks that `t` has one of the float dtypes `allowed`.
pub(crate) fn expect_dtype(
    op: &'static str,
    t: &Tensor,
    allowed: &[DType],
    what: &'static str,
) -> Result<()> {
    if allowed.contains(&t.dtype()) {
        Ok(())
    } else {
        Err(TensorError::DType {
            op,
            dtype: t.dtype(),
            what,
        })
    }
}

/// Checks that two tensors share a dtype.
pub(crate) fn expect_same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() == b.dtype() {
        Ok(())
    } else {
        Err(TensorError::DTypeMismatch {
            op,
            lhs: a.dtype(),
            rhs: b.dtype(),
        })
    }
}

/// The float dtypes elementwise ops compute in.
pub(crate) const COMPUTE_FLOATS: &[DType] = &[DType::F32, DType::F64];
