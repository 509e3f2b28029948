//! Cross-entropy: the fused facade kernel forward, its fused gradient backward.

use tempra_tensor::{DType, Tensor};

use crate::autograd::Autograd;
use crate::error::Result;
use crate::node::{record, rule};
use crate::var::Var;

impl Autograd {
    /// Per-row cross-entropy (fused log-softmax + NLL) of `logits [.., V]` against U32
    /// `targets [..]` → `[..]`; rows whose target is `ignore_index` give 0 and no gradient.
    pub fn cross_entropy_rows(
        &self,
        logits: &Var,
        targets: &Tensor,
        ignore_index: Option<u32>,
    ) -> Result<Var> {
        let rows = self
            .ctx
            .cross_entropy(&logits.tensor, targets, ignore_index)?;
        Ok(record(rows, "cross_entropy", &[logits], |_| {
            let (logits, targets) = (logits.tensor.clone(), targets.clone());
            rule(move |c, g, _| {
                Ok(vec![Some(c.cross_entropy_backward(
                    &logits,
                    &targets,
                    ignore_index,
                    &g,
                )?)])
            })
        }))
    }

    /// Mean cross-entropy over the rows whose target is not `ignore_index` (0 when every
    /// row is ignored), as a rank-0 loss. Counting the kept rows reads `targets` back to
    /// the host when an ignore index is given (targets are small).
    pub fn cross_entropy(
        &self,
        logits: &Var,
        targets: &Tensor,
        ignore_index: Option<u32>,
    ) -> Result<Var> {
        let rows = self.cross_entropy_rows(logits, targets, ignore_index)?;
        let kept = match ignore_index {
            None => targets.elem_count(),
            Some(ignored) if targets.dtype() == DType::U32 => targets
                .to_vec::<u32>()?
                .iter()
                .filter(|&&t| t != ignored)
                .count(),
            Some(_) => targets.elem_count(),
        };
        let total = self.sum_all(&rows)?;
        self.mul_scalar(&total, 1.0 / kept.max(1) as f64)
    }
}
