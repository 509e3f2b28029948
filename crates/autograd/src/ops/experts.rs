//! The mixture-of-experts ops: `top_k`, `gather`, `weighted_sum` and `expert_linear`.
//! `top_k`'s indices are inference-only: they come back as a plain [`Tensor`] (U32, no
//! node), so nothing flows through the choice of experts; the chosen values carry
//! gradients, as do the inputs of the other three ops (and a float expert weight).

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::autograd::Autograd;
use crate::error::{AutogradError, Result};
use crate::node::{record, rule};
use crate::var::Var;

/// The gradient of picking `indices [.., k]` along the last dim of an `[.., n]` input:
/// `g [.., k]` summed into the picked positions (repeats accumulate), through a one-hot
/// `[.., k, n]` of the indices.
fn scatter_last(c: &ExecContext, indices: &Tensor, g: &Tensor, n: usize) -> Result<Tensor> {
    let onehot = c.one_hot(indices, n, g.dtype())?;
    let spread = c.mul(&onehot, &g.unsqueeze(g.rank())?)?;
    Ok(c.sum(&spread, g.rank() - 1, false)?)
}

/// `t`'s `[T, k, ..]` rows as `[T·k, last]`, copied only when a view cannot say it.
fn rows(c: &ExecContext, t: &Tensor) -> Result<Tensor> {
    let last = t.shape().last();
    let count = t.elem_count() / last.max(1);
    match t.reshape(&[count, last]) {
        Ok(view) => Ok(view),
        Err(_) => Ok(c.contiguous(t)?.reshape(&[count, last])?),
    }
}

impl Autograd {
    /// The `k` largest values along the last dim of `x` and their indices (see
    /// [`ExecContext::top_k`]). The values' gradient goes to the chosen positions; the
    /// indices are a constant U32 tensor (the choice itself has no gradient).
    pub fn top_k(&self, x: &Var, k: usize) -> Result<(Var, Tensor)> {
        let (values, indices) = self.ctx.top_k(&x.tensor, k)?;
        let n = x.tensor.shape().last();
        let values = record(values, "top_k", &[x], |_| {
            let indices = indices.clone();
            rule(move |c, g, _| Ok(vec![Some(scatter_last(c, &indices, &g, n)?)]))
        });
        Ok((values, indices))
    }

    /// `x [.., n]` at U32 `indices [.., k]` along the last dim (see
    /// [`ExecContext::gather`]); the gradient scatter-adds into the picked positions.
    pub fn gather(&self, x: &Var, indices: &Tensor) -> Result<Var> {
        let out = self.ctx.gather(&x.tensor, indices)?;
        let n = x.tensor.shape().last();
        Ok(record(out, "gather", &[x], |_| {
            let indices = indices.clone();
            rule(move |c, g, _| Ok(vec![Some(scatter_last(c, &indices, &g, n)?)]))
        }))
    }

    /// `Σ_s weights[.., s] · x[.., s, :]` (see [`ExecContext::weighted_sum`]); gradients
    /// flow to both `x` and the weights.
    pub fn weighted_sum(&self, x: &Var, weights: &Var) -> Result<Var> {
        let out = self.ctx.weighted_sum(&x.tensor, &weights.tensor)?;
        Ok(record(out, "weighted_sum", &[x, weights], |_| {
            let sx = weights.requires_grad().then(|| x.tensor.clone());
            let sw = x.requires_grad().then(|| weights.tensor.clone());
            rule(move |c, g, _| {
                // g [.., D] against each slot: [.., 1, D].
                let g_slots = g.unsqueeze(g.rank() - 1)?;
                let dx = match &sw {
                    Some(w) => Some(c.mul(&w.unsqueeze(w.rank())?, &g_slots)?),
                    None => None,
                };
                let dw = match &sx {
                    Some(x) => Some(c.sum(&c.mul(x, &g_slots)?, x.rank() - 1, false)?),
                    None => None,
                };
                Ok(vec![dx, dw])
            })
        }))
    }

    /// The grouped-expert product (see [`ExecContext::expert_linear`]). Gradients flow to
    /// `x` (through the chosen experts' transposed weights), to a float `w` (each
    /// expert's rows' outer products, through a one-hot of `ids`) and to `bias`. A
    /// block-quantized weight must be a constant, as in [`Autograd::linear`]: `x`'s
    /// gradient then reads a transient F32 copy of it.
    pub fn expert_linear(&self, x: &Var, w: &Var, ids: &Tensor, bias: Option<&Var>) -> Result<Var> {
        if w.requires_grad() && w.dtype().is_quantized() {
            return Err(AutogradError::NotDifferentiable {
                op: "expert_linear",
                what: format!(
                    "a {} weight (quantized weights must be constants)",
                    w.dtype()
                ),
            });
        }
        let out = self
            .ctx
            .expert_linear(&x.tensor, &w.tensor, ids, bias.map(|b| &b.tensor))?;
        let inputs: &[&Var] = match bias {
            Some(b) => &[x, w, b],
            None => &[x, w],
        };
        Ok(record(out, "expert_linear", inputs, |_| {
            let ids = ids.clone();
            let sx = w.requires_grad().then(|| x.tensor.clone());
            let sw = x.requires_grad().then(|| w.tensor.clone());
            let experts = w.dims()[0];
            rule(move |c, g, need| {
                // dx[t, s] = g[t, s] · w[e]: the product through wᵀ [E, K, N], a view.
                let dx = match &sw {
                    Some(w) => {
                        let dense;
                        let w = if w.dtype().is_quantized() {
                            dense = c.cast(w, DType::F32)?;
                            &dense
                        } else {
                            w
                        };
                        Some(c.expert_linear(&g, &w.transpose(1, 2)?, &ids, None)?)
                    }
                    None => None,
                };
                let need_db = need.get(2).copied().unwrap_or(false);
                let (dw, db) = if sx.is_some() || need_db {
                    // The routing as a one-hot [T·k, E], transposed: row r goes to expert e.
                    let onehot = c.one_hot(&ids, experts, g.dtype())?;
                    let routed = rows(c, &onehot)?.t()?; // [E, T·k]
                    let g_rows = rows(c, &g)?; // [T·k, N]
                    let db = need_db.then(|| c.matmul(&routed, &g_rows)).transpose()?;
                    let dw = match &sx {
                        Some(x) => {
                            let x = x.broadcast_to(&[g.dims()[0], g.dims()[1], x.dims()[2]])?;
                            let x_rows = rows(c, &x)?; // [T·k, K]
                            // [E, T·k, N]: each expert's rows of g, zero elsewhere.
                            let g_e = c.mul(&routed.unsqueeze(2)?, &g_rows.unsqueeze(0)?)?;
                            Some(c.matmul(&g_e.transpose(1, 2)?, &x_rows)?)
                        }
                        None => None,
                    };
                    (dw, db)
                } else {
                    (None, None)
                };
                Ok(vec![dx, dw, db])
            })
        }))
    }
}
