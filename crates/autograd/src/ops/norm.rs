//! Normalisations over the last dim: `rms_norm` and `layer_norm`, with backward rules
//! composed from facade ops (statistics recomputed from the saved input, not stored).

use tempra_tensor::{ExecContext, Tensor};

use crate::autograd::Autograd;
use crate::error::Result;
use crate::node::{record, rule};
use crate::ops::masks::{mul_into, sub_into};
use crate::var::Var;

/// `p` in `like`'s dtype (norm weights may be F16/BF16 while activations are F32).
fn as_dtype_of(c: &ExecContext, p: &Tensor, like: &Tensor) -> Result<Tensor> {
    if p.dtype() == like.dtype() {
        Ok(p.clone())
    } else {
        Ok(c.cast(p, like.dtype())?)
    }
}

/// `1/√(v + eps)` for row statistics `v [.., 1]`.
fn inv_std(c: &ExecContext, v: &Tensor, eps: f64) -> Result<Tensor> {
    Ok(c.rsqrt(&c.add_scalar(v, eps)?)?)
}

/// Mean over the last dim, kept as size 1.
fn row_mean(c: &ExecContext, t: &Tensor) -> Result<Tensor> {
    Ok(c.mean(t, t.rank() - 1, true)?)
}

impl Autograd {
    /// RMS norm over the last dim: `x / √(mean(x²) + eps) · w`. See
    /// [`ExecContext::rms_norm`].
    pub fn rms_norm(&self, x: &Var, w: &Var, eps: f64) -> Result<Var> {
        let out = self.ctx.rms_norm(&x.tensor, &w.tensor, eps)?;
        Ok(record(out, "rms_norm", &[x, w], |_| {
            let (sx, sw) = (
                x.tensor.clone(),
                x.requires_grad().then(|| w.tensor.clone()),
            );
            rule(move |c, g, need| {
                // r = 1/√(mean(x²)+eps), x̂ = x·r
                let r = inv_std(c, &row_mean(c, &c.sqr(&sx)?)?, eps)?;
                let xhat = c.mul(&sx, &r)?;
                let dw = if need[1] {
                    Some(c.mul(&g, &xhat)?)
                } else {
                    None
                };
                let dx = match &sw {
                    Some(w) => {
                        // dx = r·(g·w − x̂·mean(g·w·x̂))
                        let gw = c.mul(&g, &as_dtype_of(c, w, &sx)?)?;
                        let m = row_mean(c, &c.mul(&gw, &xhat)?)?;
                        let proj = mul_into(c, xhat, &m)?;
                        Some(mul_into(c, sub_into(c, gw, &proj)?, &r)?)
                    }
                    None => None,
                };
                Ok(vec![dx, dw])
            })
        }))
    }

    /// Layer norm over the last dim: `(x − mean) / √(var + eps) · w (+ b)`. See
    /// [`ExecContext::layer_norm`].
    pub fn layer_norm(&self, x: &Var, w: &Var, b: Option<&Var>, eps: f64) -> Result<Var> {
        let out = self
            .ctx
            .layer_norm(&x.tensor, &w.tensor, b.map(|b| &b.tensor), eps)?;
        let inputs: &[&Var] = match b {
            Some(b) => &[x, w, b],
            None => &[x, w],
        };
        Ok(record(out, "layer_norm", inputs, |_| {
            let (sx, sw) = (
                x.tensor.clone(),
                x.requires_grad().then(|| w.tensor.clone()),
            );
            rule(move |c, g, need| {
                // x̂ = (x − μ)·r, r = 1/√(var + eps)
                let xc = c.sub(&sx, &row_mean(c, &sx)?)?;
                let r = inv_std(c, &row_mean(c, &c.sqr(&xc)?)?, eps)?;
                let xhat = mul_into(c, xc, &r)?;
                let dw = if need[1] {
                    Some(c.mul(&g, &xhat)?)
                } else {
                    None
                };
                let dx = match &sw {
                    Some(w) => {
                        // dx = r·(g·w − mean(g·w) − x̂·mean(g·w·x̂))
                        let gw = c.mul(&g, &as_dtype_of(c, w, &sx)?)?;
                        let m1 = row_mean(c, &gw)?;
                        let m2 = row_mean(c, &c.mul(&gw, &xhat)?)?;
                        let centred = sub_into(c, gw, &m1)?;
                        let proj = mul_into(c, xhat, &m2)?;
                        Some(mul_into(c, sub_into(c, centred, &proj)?, &r)?)
                    }
                    None => None,
                };
                let db = need.get(2).copied().unwrap_or(false).then_some(g);
                Ok(vec![dx, dw, db])
            })
        }))
    }
}
