//! Optimizers over a [`ParamStore`]: SGD with momentum, AdamW, a
//! warmup + cosine learning-rate schedule and gradient clipping by global norm.
//!
//! Updates run through the facade (any backend) and write parameters and optimizer
//! state in place (`ExecContext::binary_inplace`) whenever the store is a buffer's only
//! holder, i.e. once the step's graph has been dropped. The few transients a step needs
//! (e.g. `g²` for AdamW) come from the pool and return to it, so a steady-state step
//! allocates nothing fresh.

mod adamw;
mod clip;
mod schedule;
mod sgd;

use tempra_tensor::{BinaryOp, ExecContext, Tensor};

pub use adamw::{AdamW, AdamWConfig};
pub use clip::{clip_grad_norm, global_grad_norm};
pub use schedule::WarmupCosine;
pub use sgd::{Sgd, SgdConfig};

use crate::error::Result;
use crate::grad_store::GradStore;
use crate::param_store::ParamStore;

/// What one optimizer step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Trainable parameters updated.
    pub updated: usize,
    /// Of those, how many were written in their own buffer. Fewer than `updated` means
    /// something else still held a parameter's buffer (a live graph, or a clone of its
    /// `Var` kept outside the store, which now holds the old value), so the update
    /// copied.
    pub in_place: usize,
    /// Trainable parameters without a gradient (not reached by backward), left as they
    /// were.
    pub skipped: usize,
}

/// An optimizer: updates a store's trainable parameters from gradients.
pub trait Optimizer {
    /// One update of every trainable parameter of `params` that has a gradient in `grads`.
    fn step(
        &mut self,
        ctx: &ExecContext,
        params: &mut ParamStore,
        grads: &GradStore,
    ) -> Result<StepReport>;

    /// The current learning rate.
    fn learning_rate(&self) -> f64;

    /// Sets the learning rate (e.g. from a [`WarmupCosine`] schedule each step).
    fn set_learning_rate(&mut self, lr: f64);
}

/// A rank-0 tensor of `like`'s dtype holding `value`: the right operand of in-place
/// scalar updates (the facade's scalar ops allocate their output).
fn scalar(ctx: &ExecContext, like: &Tensor, value: f64) -> Result<Tensor> {
    Ok(ctx.full(&[], like.dtype(), value)?)
}

/// `a = op(a, b)` in `a`'s buffer when unshared.
fn apply(ctx: &ExecContext, op: BinaryOp, a: Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(ctx.binary_inplace(op, a, b)?)
}

/// The address of `t`'s storage, to tell afterwards whether an update stayed in place.
fn storage_addr(t: &Tensor) -> usize {
    std::ptr::from_ref(t.storage()) as usize
}
