//! Stochastic gradient descent with momentum and L2 weight decay.

use std::collections::HashMap;

use tempra_tensor::{BinaryOp, ExecContext, Tensor};

use crate::error::{AutogradError, Result};
use crate::grad_store::GradStore;
use crate::optim::{Optimizer, StepReport, apply, scalar, storage_addr};
use crate::param_store::ParamStore;
use crate::var::VarId;

/// Settings of [`Sgd`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    /// Learning rate.
    pub lr: f64,
    /// Momentum μ (0 for plain SGD): `v ← μ·v + g`, `p ← p − lr·v`.
    pub momentum: f64,
    /// L2 penalty added to the gradient: `g ← g + wd·p`.
    pub weight_decay: f64,
}

impl Default for SgdConfig {
    fn default() -> Self {
        Self {
            lr: 0.01,
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }
}

/// SGD with momentum (PyTorch's convention, no dampening). The velocity buffers are
/// allocated on a parameter's first step and updated in place afterwards.
#[derive(Debug)]
pub struct Sgd {
    config: SgdConfig,
    velocity: HashMap<VarId, Tensor>,
}

impl Sgd {
    /// An optimizer with `config`; an error for a negative or non-finite setting.
    pub fn new(config: SgdConfig) -> Result<Self> {
        for (name, v) in [
            ("lr", config.lr),
            ("momentum", config.momentum),
            ("weight_decay", config.weight_decay),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(AutogradError::Argument {
                    op: "Sgd::new",
                    name,
                    reason: format!("{v} must be finite and ≥ 0"),
                });
            }
        }
        Ok(Self {
            config,
            velocity: HashMap::new(),
        })
    }
}

impl Optimizer for Sgd {
    fn step(
        &mut self,
        ctx: &ExecContext,
        params: &mut ParamStore,
        grads: &GradStore,
    ) -> Result<StepReport> {
        let SgdConfig {
            lr,
            momentum,
            weight_decay,
        } = self.config;
        let mut report = StepReport::default();
        let ids: Vec<_> = params.trainable_ids().collect();
        for pid in ids {
            let Some(vid) = params.var_id(pid) else {
                continue;
            };
            let Some(g) = grads.get_id(vid) else {
                report.skipped += 1;
                continue;
            };
            let p = params[pid].tensor();
            // g' = g + wd·p
            let g = if weight_decay > 0.0 {
                apply(ctx, BinaryOp::Add, ctx.mul_scalar(p, weight_decay)?, g)?
            } else {
                g.clone()
            };
            let step = if momentum > 0.0 {
                let v = match self.velocity.remove(&vid) {
                    Some(v) => {
                        let mu = scalar(ctx, &v, momentum)?;
                        let v = apply(ctx, BinaryOp::Mul, v, &mu)?;
                        apply(ctx, BinaryOp::Add, v, &g)?
                    }
                    None => ctx.persistent_copy(&g)?,
                };
                let step = ctx.mul_scalar(&v, lr)?;
                self.velocity.insert(vid, v);
                step
            } else {
                ctx.mul_scalar(&g, lr)?
            };
            let before = storage_addr(params[pid].tensor());
            params.update(pid, |p| apply(ctx, BinaryOp::Sub, p, &step))?;
            report.updated += 1;
            report.in_place += usize::from(storage_addr(params[pid].tensor()) == before);
        }
        Ok(report)
    }

    fn learning_rate(&self) -> f64 {
        self.config.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.config.lr = lr;
    }
}
