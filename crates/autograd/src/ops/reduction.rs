//! Reductions along a dim, whole-tensor sums and means, softmax and log-softmax.

use tempra_tensor::{ExecContext, ReduceOp, Tensor};

use crate::autograd::Autograd;
use crate::error::Result;
use crate::node::{record, rule};
use crate::ops::masks::{mul_into, sub_into};
use crate::var::Var;

/// `g` (the reduced gradient) broadcast back over `dim` of `x_dims` (a view, no copy).
fn expand_back(g: &Tensor, x_dims: &[usize], dim: usize, keepdim: bool) -> Result<Tensor> {
    let g = if keepdim {
        g.clone()
    } else {
        g.unsqueeze(dim)?
    };
    Ok(g.broadcast_to(x_dims)?)
}

/// 1 at the first maximum (or minimum) along `dim` of `x`, else 0: argmax then one-hot,
/// computed along the last dim of a transposed view and transposed back.
fn extremum_mask(c: &ExecContext, x: &Tensor, dim: usize, max: bool) -> Result<Tensor> {
    let last = x.rank() - 1;
    let moved = x.transpose(dim, last)?;
    let moved = if max { moved } else { c.neg(&moved)? };
    let idx = c.argmax(&moved, last, false)?;
    let onehot = c.one_hot(&idx, x.dims()[dim], x.dtype())?;
    Ok(onehot.transpose(dim, last)?)
}

impl Autograd {
    /// Reduces `x` along `dim`; keeps the dim as size 1 when `keepdim`. The gradient of
    /// max/min goes to the first extremal element along `dim`.
    pub fn reduce(&self, op: ReduceOp, x: &Var, dim: usize, keepdim: bool) -> Result<Var> {
        let out = self.ctx.reduce(op, &x.tensor, dim, keepdim)?;
        Ok(record(out, op.name(), &[x], |_| {
            let dims = *x.tensor.shape();
            let saved = matches!(op, ReduceOp::Max | ReduceOp::Min).then(|| x.tensor.clone());
            rule(move |c, g, _| {
                let grad = match op {
                    ReduceOp::Sum => expand_back(&g, dims.dims(), dim, keepdim)?,
                    ReduceOp::Mean => {
                        let scaled = c.mul_scalar(&g, 1.0 / dims.dims()[dim] as f64)?;
                        expand_back(&scaled, dims.dims(), dim, keepdim)?
                    }
                    ReduceOp::Max | ReduceOp::Min => {
                        let x = saved
                            .as_ref()
                            .ok_or(crate::AutogradError::GraphConsumed { op: op.name() })?;
                        let mask = extremum_mask(c, x, dim, op == ReduceOp::Max)?;
                        c.mul(&mask, &expand_back(&g, dims.dims(), dim, keepdim)?)?
                    }
                };
                Ok(vec![Some(grad)])
            })
        }))
    }

    /// Σ along `dim`.
    pub fn sum(&self, x: &Var, dim: usize, keepdim: bool) -> Result<Var> {
        self.reduce(ReduceOp::Sum, x, dim, keepdim)
    }

    /// Mean along `dim`.
    pub fn mean(&self, x: &Var, dim: usize, keepdim: bool) -> Result<Var> {
        self.reduce(ReduceOp::Mean, x, dim, keepdim)
    }

    /// Maximum along `dim`.
    pub fn max(&self, x: &Var, dim: usize, keepdim: bool) -> Result<Var> {
        self.reduce(ReduceOp::Max, x, dim, keepdim)
    }

    /// Minimum along `dim`.
    pub fn min(&self, x: &Var, dim: usize, keepdim: bool) -> Result<Var> {
        self.reduce(ReduceOp::Min, x, dim, keepdim)
    }

    /// Σ of every element, as a rank-0 value.
    pub fn sum_all(&self, x: &Var) -> Result<Var> {
        let out = self.ctx.sum_all(&x.tensor)?;
        Ok(record(out, "sum_all", &[x], |_| {
            let dims = *x.tensor.shape();
            rule(move |_, g, _| Ok(vec![Some(g.broadcast_to(dims.dims())?)]))
        }))
    }

    /// Mean of every element, as a rank-0 value.
    pub fn mean_all(&self, x: &Var) -> Result<Var> {
        let n = x.elem_count().max(1) as f64;
        self.mul_scalar(&self.sum_all(x)?, 1.0 / n)
    }

    /// Softmax along the last dim.
    pub fn softmax(&self, x: &Var) -> Result<Var> {
        let y = self.ctx.softmax(&x.tensor)?;
        Ok(record(y, "softmax", &[x], |y| {
            let y = y.clone();
            rule(move |c, g, _| {
                // y ⊙ (g − Σ g⊙y)
                let last = y.rank() - 1;
                let dot = c.sum(&c.mul(&g, &y)?, last, true)?;
                Ok(vec![Some(mul_into(c, sub_into(c, g, &dot)?, &y)?)])
            })
        }))
    }

    /// Log-softmax along the last dim.
    pub fn log_softmax(&self, x: &Var) -> Result<Var> {
        let y = self.ctx.log_softmax(&x.tensor)?;
        Ok(record(y, "log_softmax", &[x], |y| {
            let y = y.clone();
            rule(move |c, g, _| {
                // g − softmax ⊙ Σ g
                let last = y.rank() - 1;
                let total = c.sum(&g, last, true)?;
                let p = mul_into(c, c.exp(&y)?, &total)?;
                Ok(vec![Some(sub_into(c, g, &p)?)])
            })
        }))
    }
}
