//! AdamW: Adam with decoupled weight decay (Loshchilov & Hutter).

use std::collections::HashMap;

use tempra_tensor::{BinaryOp, ExecContext, Tensor};

use crate::error::{AutogradError, Result};
use crate::grad_store::GradStore;
use crate::optim::{Optimizer, StepReport, apply, scalar, storage_addr};
use crate::param_store::ParamStore;
use crate::var::VarId;

/// Settings of [`AdamW`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWConfig {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay β₁.
    pub beta1: f64,
    /// Second-moment decay β₂.
    pub beta2: f64,
    /// Added to `√v̂` in the denominator.
    pub eps: f64,
    /// Decoupled weight decay: `p ← p·(1 − lr·wd)` before the Adam step.
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// PyTorch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }
}

/// First and second moments of one parameter.
#[derive(Debug)]
struct Moments {
    m: Tensor,
    v: Tensor,
}

/// AdamW. Per parameter and step: `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`,
/// `p ← p(1 − lr·wd) − lr·m̂/(√v̂ + ε)` with bias-corrected `m̂`, `v̂`. The moments are
/// allocated on a parameter's first step; afterwards `p`, `m` and `v` are updated in
/// place and the step borrows three pool transients per parameter (`g²`, `√v`, the
/// update).
#[derive(Debug)]
pub struct AdamW {
    config: AdamWConfig,
    steps: HashMap<VarId, u64>,
    moments: HashMap<VarId, Moments>,
}

impl AdamW {
    /// An optimizer with `config`; an error for settings out of range.
    pub fn new(config: AdamWConfig) -> Result<Self> {
        let bad = |name, v: f64, want: &str| AutogradError::Argument {
            op: "AdamW::new",
            name,
            reason: format!("{v} must be {want}"),
        };
        for (name, v) in [
            ("lr", config.lr),
            ("eps", config.eps),
            ("weight_decay", config.weight_decay),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(bad(name, v, "finite and ≥ 0"));
            }
        }
        for (name, v) in [("beta1", config.beta1), ("beta2", config.beta2)] {
            if !(0.0..1.0).contains(&v) {
                return Err(bad(name, v, "in [0, 1)"));
            }
        }
        Ok(Self {
            config,
            steps: HashMap::new(),
            moments: HashMap::new(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }
}

impl Optimizer for AdamW {
    fn step(
        &mut self,
        ctx: &ExecContext,
        params: &mut ParamStore,
        grads: &GradStore,
    ) -> Result<StepReport> {
        let AdamWConfig {
            lr,
            beta1,
            beta2,
            eps,
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
            let t = self.steps.entry(vid).or_insert(0);
            *t += 1;
            let t = *t as i32;
            let (bc1, bc2) = (1.0 - beta1.powi(t), 1.0 - beta2.powi(t));
            let Moments { m, v } = match self.moments.remove(&vid) {
                Some(state) => state,
                None => Moments {
                    m: ctx.zeros_persistent(g.dims(), g.dtype())?,
                    v: ctx.zeros_persistent(g.dims(), g.dtype())?,
                },
            };
            // m ← β₁(m − g) + g = β₁m + (1−β₁)g, all in m's buffer.
            let m = apply(ctx, BinaryOp::Sub, m, g)?;
            let m = apply(ctx, BinaryOp::Mul, m, &scalar(ctx, g, beta1)?)?;
            let m = apply(ctx, BinaryOp::Add, m, g)?;
            // v ← β₂(v − g²) + g²
            let g2 = ctx.sqr(g)?;
            let v = apply(ctx, BinaryOp::Sub, v, &g2)?;
            let v = apply(ctx, BinaryOp::Mul, v, &scalar(ctx, g, beta2)?)?;
            let v = apply(ctx, BinaryOp::Add, v, &g2)?;
            drop(g2);
            // update = (lr/bc1)·m / (√v/√bc2 + ε)
            let denom = apply(
                ctx,
                BinaryOp::Mul,
                ctx.sqrt(&v)?,
                &scalar(ctx, g, 1.0 / bc2.sqrt())?,
            )?;
            let denom = apply(ctx, BinaryOp::Add, denom, &scalar(ctx, g, eps)?)?;
            let update = ctx.div(&m, &denom)?;
            drop(denom);
            let update = apply(ctx, BinaryOp::Mul, update, &scalar(ctx, g, lr / bc1)?)?;
            self.moments.insert(vid, Moments { m, v });
            let decay = (weight_decay > 0.0)
                .then(|| scalar(ctx, g, 1.0 - lr * weight_decay))
                .transpose()?;
            let before = storage_addr(params[pid].tensor());
            params.update(pid, |p| {
                let p = match &decay {
                    Some(d) => apply(ctx, BinaryOp::Mul, p, d)?,
                    None => p,
                };
                apply(ctx, BinaryOp::Sub, p, &update)
            })?;
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
