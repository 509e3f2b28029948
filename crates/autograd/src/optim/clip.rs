//! Gradient clipping by global norm.

use tempra_tensor::{BinaryOp, ExecContext};

use crate::error::Result;
use crate::grad_store::GradStore;

/// `√(Σ ‖g‖²)` over every gradient in `grads` (one small read-back per gradient).
pub fn global_grad_norm(ctx: &ExecContext, grads: &GradStore) -> Result<f64> {
    let mut total = 0.0;
    for (_, g) in grads.iter() {
        let sq = ctx.sum_all(&ctx.sqr(g)?)?;
        total += sq.to_vec_f64()?.first().copied().unwrap_or(0.0);
    }
    Ok(total.sqrt())
}

/// Scales every gradient by `max_norm / norm` when their global norm exceeds `max_norm`
/// (in place where a gradient's buffer is unshared). Returns the norm before clipping.
pub fn clip_grad_norm(ctx: &ExecContext, grads: &mut GradStore, max_norm: f64) -> Result<f64> {
    let norm = global_grad_norm(ctx, grads)?;
    if norm.is_finite() && norm > max_norm {
        let factor = max_norm / (norm + 1e-12);
        for g in grads.values_mut() {
            let scale = ctx.full(&[], g.dtype(), factor)?;
            // Take the gradient by value (the scale stands in) so its buffer can be reused.
            let value = std::mem::replace(g, scale.clone());
            *g = ctx.binary_inplace(BinaryOp::Mul, value, &scale)?;
        }
    }
    Ok(norm)
}
