//! Matrix products: batched `matmul` and `linear` (x·wᵀ + b, weights of any dtype).

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::autograd::Autograd;
use crate::error::{AutogradError, Result};
use crate::node::{record, rule};
use crate::var::Var;

/// `t` viewed as `[rows, last]` (copied first only when its layout cannot be reshaped).
fn as_rows(c: &ExecContext, t: &Tensor) -> Result<Tensor> {
    let last = t.shape().last();
    let rows = t.elem_count() / last.max(1);
    match t.reshape(&[rows, last]) {
        Ok(view) => Ok(view),
        Err(_) => Ok(c.contiguous(t)?.reshape(&[rows, last])?),
    }
}

/// `g [.., N] · w [N, K] → [.., K]`: linear's input gradient. A block-quantized weight is
/// dequantized to a transient F32 copy first (the weight gets no gradient).
fn linear_input_grad(c: &ExecContext, g: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dense;
    let w = if w.dtype().is_quantized() {
        dense = c.cast(w, DType::F32)?;
        &dense
    } else {
        w
    };
    if g.rank() == 1 {
        return Ok(c.matmul(&g.unsqueeze(0)?, w)?.squeeze(0)?);
    }
    Ok(c.matmul(g, w)?)
}

impl Autograd {
    /// `a [.., M, K] · b [.., K, N] → [.., M, N]` with broadcast batch dims; transposed and
    /// strided views are used as they are. See [`ExecContext::matmul`].
    pub fn matmul(&self, a: &Var, b: &Var) -> Result<Var> {
        let out = self.ctx.matmul(&a.tensor, &b.tensor)?;
        Ok(record(out, "matmul", &[a, b], |_| {
            let sa = b.requires_grad().then(|| a.tensor.clone());
            let sb = a.requires_grad().then(|| b.tensor.clone());
            rule(move |c, g, _| {
                // da = g·bᵀ, db = aᵀ·g (summed over broadcast batch dims by the engine)
                let da = match &sb {
                    Some(b) => Some(c.matmul(&g, &b.t()?)?),
                    None => None,
                };
                let db = match &sa {
                    Some(a) => Some(c.matmul(&a.t()?, &g)?),
                    None => None,
                };
                Ok(vec![da, db])
            })
        }))
    }

    /// `x [.., K] · wᵀ (+ bias) → [.., N]` for `w [N, K]` of any float or block dtype.
    ///
    /// Gradients flow to `x`, a float `w` and `bias`. A block-quantized weight must be a
    /// constant (a variable one is an error): `x`'s gradient then uses a transient F32
    /// dequantized copy of it, one weight's worth of pool memory for the duration of the
    /// rule.
    pub fn linear(&self, x: &Var, w: &Var, bias: Option<&Var>) -> Result<Var> {
        if w.requires_grad() && w.dtype().is_quantized() {
            return Err(AutogradError::NotDifferentiable {
                op: "linear",
                what: format!(
                    "a {} weight (quantized weights must be constants)",
                    w.dtype()
                ),
            });
        }
        let out = self
            .ctx
            .linear(&x.tensor, &w.tensor, bias.map(|b| &b.tensor))?;
        let inputs: &[&Var] = match bias {
            Some(b) => &[x, w, b],
            None => &[x, w],
        };
        Ok(record(out, "linear", inputs, |_| {
            let sx = w.requires_grad().then(|| x.tensor.clone());
            let sw = x.requires_grad().then(|| w.tensor.clone());
            rule(move |c, g, need| {
                let dx = match &sw {
                    Some(w) => Some(linear_input_grad(c, &g, w)?),
                    None => None,
                };
                // dw = g_rowsᵀ · x_rows
                let dw = match &sx {
                    Some(x) => Some(c.matmul(&as_rows(c, &g)?.t()?, &as_rows(c, x)?)?),
                    None => None,
                };
                // The bias gradient is g summed over every leading dim: the engine does it.
                let db = need.get(2).copied().unwrap_or(false).then_some(g);
                Ok(vec![dx, dw, db])
            })
        }))
    }
}
