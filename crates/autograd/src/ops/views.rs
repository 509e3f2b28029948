//! Views on `Var` (no copy, no context needed): narrow, reshape, broadcast_to, transpose,
//! permute, squeeze, unsqueeze, select. Their gradients are views too, except narrow's
//! and select's, which place the gradient into zeros of the input's shape.

use tempra_tensor::{ExecContext, Shape, Tensor, TensorError};

use crate::error::Result;
use crate::node::{record, rule};
use crate::var::Var;

/// Zeros of `shape` with `g` written at `start..` along `dim`.
fn place(c: &ExecContext, g: &Tensor, shape: &Shape, dim: usize, start: usize) -> Result<Tensor> {
    let mut out = c.zeros(shape.dims(), g.dtype())?;
    c.write_slice(&mut out, dim, start, g)?;
    Ok(out)
}

/// `g` reshaped to `dims`, copied to contiguous first only when the view is impossible.
fn reshape_grad(c: &ExecContext, g: Tensor, dims: &[usize]) -> Result<Tensor> {
    match g.reshape(dims) {
        Ok(view) => Ok(view),
        Err(_) => Ok(c.contiguous(&g)?.reshape(dims)?),
    }
}

impl Var {
    /// A view of `len` entries of `dim` from `start`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Var> {
        let out = self.tensor.narrow(dim, start, len)?;
        Ok(record(out, "narrow", &[self], |_| {
            let shape = *self.shape();
            rule(move |c, g, _| Ok(vec![Some(place(c, &g, &shape, dim, start)?)]))
        }))
    }

    /// A view with a new shape of the same element count (an error when the layout cannot
    /// express it without a copy: use [`crate::Autograd::contiguous`] first).
    pub fn reshape(&self, dims: &[usize]) -> Result<Var> {
        let out = self.tensor.reshape(dims)?;
        Ok(record(out, "reshape", &[self], |_| {
            let shape = *self.shape();
            rule(move |c, g, _| Ok(vec![Some(reshape_grad(c, g, shape.dims())?)]))
        }))
    }

    /// A view broadcast to `dims`; the gradient is summed back.
    pub fn broadcast_to(&self, dims: &[usize]) -> Result<Var> {
        let out = self.tensor.broadcast_to(dims)?;
        Ok(record(out, "broadcast_to", &[self], |_| {
            rule(|_, g, _| Ok(vec![Some(g)]))
        }))
    }

    /// A view with dims `d0` and `d1` swapped.
    pub fn transpose(&self, d0: usize, d1: usize) -> Result<Var> {
        let out = self.tensor.transpose(d0, d1)?;
        Ok(record(out, "transpose", &[self], |_| {
            rule(move |_, g, _| Ok(vec![Some(g.transpose(d0, d1)?)]))
        }))
    }

    /// A view with the last two dims swapped.
    pub fn t(&self) -> Result<Var> {
        let r = self.rank();
        if r < 2 {
            return Err(TensorError::Rank {
                op: "t",
                rank: r,
                what: "at least 2",
            }
            .into());
        }
        self.transpose(r - 2, r - 1)
    }

    /// A view with dims reordered: dim `i` of the result is dim `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Result<Var> {
        let out = self.tensor.permute(perm)?;
        Ok(record(out, "permute", &[self], |_| {
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            rule(move |_, g, _| Ok(vec![Some(g.permute(&inverse)?)]))
        }))
    }

    /// A view without dim `dim` (which must have size 1).
    pub fn squeeze(&self, dim: usize) -> Result<Var> {
        let out = self.tensor.squeeze(dim)?;
        Ok(record(out, "squeeze", &[self], |_| {
            rule(move |_, g, _| Ok(vec![Some(g.unsqueeze(dim)?)]))
        }))
    }

    /// A view with a new size-1 dim at `dim`.
    pub fn unsqueeze(&self, dim: usize) -> Result<Var> {
        let out = self.tensor.unsqueeze(dim)?;
        Ok(record(out, "unsqueeze", &[self], |_| {
            rule(move |_, g, _| Ok(vec![Some(g.squeeze(dim)?)]))
        }))
    }

    /// A view of index `index` along `dim`, without that dim.
    pub fn select(&self, dim: usize, index: usize) -> Result<Var> {
        let out = self.tensor.select(dim, index)?;
        Ok(record(out, "select", &[self], |_| {
            let shape = *self.shape();
            rule(move |c, g, _| {
                Ok(vec![Some(place(
                    c,
                    &g.unsqueeze(dim)?,
                    &shape,
                    dim,
                    index,
                )?)])
            })
        }))
    }
}
