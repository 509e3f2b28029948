//! Copies: concat, contiguous, cast.

use tempra_tensor::DType;

use crate::autograd::Autograd;
use crate::error::Result;
use crate::node::{record, rule};
use crate::var::Var;

impl Autograd {
    /// Joins `parts` along `dim`; each part's gradient is a view (narrow) of the output's.
    pub fn concat(&self, parts: &[&Var], dim: usize) -> Result<Var> {
        let tensors: Vec<_> = parts.iter().map(|p| &p.tensor).collect();
        let out = self.ctx.concat(&tensors, dim)?;
        Ok(record(out, "concat", parts, |_| {
            let lens: Vec<usize> = parts.iter().map(|p| p.dims()[dim]).collect();
            rule(move |_, g, need| {
                let mut start = 0;
                let mut grads = Vec::with_capacity(lens.len());
                for (&len, &needed) in lens.iter().zip(need) {
                    grads.push(if needed {
                        Some(g.narrow(dim, start, len)?)
                    } else {
                        None
                    });
                    start += len;
                }
                Ok(grads)
            })
        }))
    }

    /// `x` itself when contiguous, else a contiguous copy; the gradient passes through.
    pub fn contiguous(&self, x: &Var) -> Result<Var> {
        if x.tensor.is_contiguous() {
            return Ok(x.clone());
        }
        let out = self.ctx.contiguous(&x.tensor)?;
        Ok(record(out, "contiguous", &[x], |_| {
            rule(|_, g, _| Ok(vec![Some(g)]))
        }))
    }

    /// A contiguous copy of `x` in `dtype` (dequantizing block dtypes). The gradient is
    /// cast back to `x`'s dtype when that is F32 or F64, and stays in `dtype` otherwise.
    pub fn cast(&self, x: &Var, dtype: DType) -> Result<Var> {
        let out = self.ctx.cast(&x.tensor, dtype)?;
        Ok(record(out, "cast", &[x], |_| {
            let back = x.dtype();
            rule(move |c, g, _| {
                let grad = if matches!(back, DType::F32 | DType::F64) && g.dtype() != back {
                    c.cast(&g, back)?
                } else {
                    g
                };
                Ok(vec![Some(grad)])
            })
        }))
    }
}
