//! `Autograd`: the handle a forward is written against. It wraps an [`ExecContext`] and
//! offers every facade op over [`Var`]s, recording backward rules only for variables.

use tempra_tensor::{ExecContext, Tensor};

use crate::backward;
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
}

impl Autograd {
    /// A handle over `ctx`.
    pub fn new(ctx: ExecContext) -> Self {
        Self { ctx }
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
        if root.node.is_none() {
            return Err(AutogradError::NoGraph);
        }
        if root.elem_count() != 1 {
            return Err(AutogradError::NotScalar {
                shape: *root.shape(),
            });
        }
        let seed = self.ctx.full(root.dims(), root.dtype(), 1.0)?;
        backward::run(&self.ctx, root, seed)
    }

    /// Gradients of `root` given its gradient `seed` (the root's shape).
    pub fn backward_with(&self, root: &Var, seed: Tensor) -> Result<GradStore> {
        backward::run(&self.ctx, root, seed)
    }
}

impl From<ExecContext> for Autograd {
    fn from(ctx: ExecContext) -> Self {
        Self::new(ctx)
    }
}
