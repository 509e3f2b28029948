//! `Autograd`: the handle a forward is written against. It wraps an [`ExecContext`] and
//! offers every facade op over [`Var`]s, recording backward rules only for variables.

use std::sync::{Arc, Mutex, TryLockError};

use tempra_tensor::{ExecContext, Tensor};

use crate::backward::{self, BackwardScratch};
use crate::error::{AutogradError, Result};
use crate::grad_store::GradStore;
use crate::var::Var;

/// The op surface over [`Var`]: `ag.matmul(&a, &b)?`, `ag.rms_norm(&x, &w, eps)?`, ...
/// Each method calls the same-named [`ExecContext`] op; when an input requires grad (and
/// grad mode is on) it also records a backward rule. Works on any backend. Cheap to
/// clone.
///
/// ```
/// use tempra_autograd::{Autograd, Var};
/// use tempra_tensor::ExecContext;
///
/// let ag = Autograd::new(ExecContext::reference());
/// let x = Var::variable(ag.ctx().from_slice(&[1.0f32, -2.0, 3.0], &[3])?);
/// let y = ag.sum_all(&ag.sqr(&x)?)?; // Σ x²
/// let grads = ag.backward(&y)?;
/// assert_eq!(grads.get(&x).unwrap().to_vec_f32()?, [2.0, -4.0, 6.0]);
/// # Ok::<(), tempra_autograd::AutogradError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Autograd {
    pub(crate) ctx: ExecContext,
    /// Backward's working sets, reused by every backward of this handle and its clones
    /// (a call that finds them in use on another thread works in its own).
    scratch: Arc<Mutex<BackwardScratch>>,
}

impl Autograd {
    /// A handle over `ctx`.
    pub fn new(ctx: ExecContext) -> Self {
        Self {
            ctx,
            scratch: Arc::default(),
        }
    }

    /// The exec context (for creation ops and anything outside autograd).
    #[inline]
    pub fn ctx(&self) -> &ExecContext {
        &self.ctx
    }

    /// Gradients of the one-element `root` with respect to every leaf variable it
    /// depends on. Each node's saved views are released as soon as its rule has run, so
    /// by the end the graph holds no tensors (a second backward through it is an error).
    pub fn backward(&self, root: &Var) -> Result<GradStore> {
        let mut store = GradStore::new();
        self.backward_into(root, &mut store)?;
        Ok(store)
    }

    /// [`Self::backward`] into `store` (cleared first; its capacity is kept), so a
    /// training loop that keeps one store makes no allocation for it per step.
    pub fn backward_into(&self, root: &Var, store: &mut GradStore) -> Result<()> {
        if root.node.is_none() {
            return Err(AutogradError::NoGraph);
        }
        if root.elem_count() != 1 {
            return Err(AutogradError::NotScalar {
                shape: *root.shape(),
            });
        }
        let seed = self.ctx.full(root.dims(), root.dtype(), 1.0)?;
        self.run_backward(root, seed, store)
    }

    /// Gradients of `root` given its gradient `seed` (the root's shape).
    pub fn backward_with(&self, root: &Var, seed: Tensor) -> Result<GradStore> {
        let mut store = GradStore::new();
        self.run_backward(root, seed, &mut store)?;
        Ok(store)
    }

    fn run_backward(&self, root: &Var, seed: Tensor, store: &mut GradStore) -> Result<()> {
        match self.scratch.try_lock() {
            Ok(mut scratch) => backward::run(&self.ctx, root, seed, &mut scratch, store),
            Err(TryLockError::Poisoned(poisoned)) => {
                backward::run(&self.ctx, root, seed, &mut poisoned.into_inner(), store)
            }
            Err(TryLockError::WouldBlock) => {
                let mut own = BackwardScratch::default();
                backward::run(&self.ctx, root, seed, &mut own, store)
            }
        }
    }
}

impl From<ExecContext> for Autograd {
    fn from(ctx: ExecContext) -> Self {
        Self::new(ctx)
    }
}
