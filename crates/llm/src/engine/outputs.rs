//! `Outputs`: the forward's output plan, the one place that decides where each
//! intermediate goes.
//!
//! The forward names every intermediate once by its [`Slot`] and calls these ops. An op
//! whose inputs are on the tape (training: some input requires grad, grad mode on) runs
//! through [`Autograd`], its output from the backend's pool, retained by the tape. Any
//! other op writes into its slot of the [`StepArena`] through an `*_into` variant of
//! [`ExecContext`] (validated there like the allocating ops), or into a fresh pool
//! output when the plan has no arena or the slot is too small (counted in
//! [`crate::engine::ArenaStats::pool_outputs`]).
//!
//! A result is a [`Var`] viewing its slot. Drop it before its slot is written again (the
//! forward's intermediates live for one layer); a view still held then costs a fresh
//! buffer for the slot, never a wrong value.

use tempra_autograd::{Autograd, Var, tracking};
use tempra_tensor::{
    AttentionParams, BinaryOp, DType, ExecContext, ReduceOp, RopeConfig, Tensor, UnaryOp,
};

use crate::engine::step_arena::{Slot, StepArena};
use crate::error::Result;

/// Where a forward's outputs go: the step arena, or the pool.
pub(crate) struct Outputs<'a> {
    ag: &'a Autograd,
    arena: Option<&'a mut StepArena>,
}

/// `dims` with the last one replaced by `last`, on the stack.
fn with_last(dims: &[usize], last: usize) -> ([usize; tempra_tensor::MAX_RANK], usize) {
    let mut out = [0; tempra_tensor::MAX_RANK];
    out[..dims.len()].copy_from_slice(dims);
    if let Some(l) = out[..dims.len()].last_mut() {
        *l = last;
    }
    (out, dims.len())
}

impl<'a> Outputs<'a> {
    /// Every output from the pool (or the tape).
    pub(crate) fn pool(ag: &'a Autograd) -> Outputs<'a> {
        Outputs { ag, arena: None }
    }

    /// Untracked outputs into `arena`'s slots.
    pub(crate) fn arena(ag: &'a Autograd, arena: &'a mut StepArena) -> Outputs<'a> {
        arena.count_step();
        Outputs {
            ag,
            arena: Some(arena),
        }
    }

    /// A plan over the same autograd handle with every output from the pool (outputs
    /// the caller keeps, such as every position's logits).
    pub(crate) fn pool_plan(&self) -> Outputs<'a> {
        Outputs::pool(self.ag)
    }

    /// The exec context.
    pub(crate) fn ctx(&self) -> &'a ExecContext {
        self.ag.ctx()
    }

    /// Runs `op` on `slot` viewed as `dims` (or a fresh pool output of `dtype`) and
    /// returns the result.
    fn write(
        &mut self,
        slot: Slot,
        dims: &[usize],
        dtype: DType,
        op: impl FnOnce(&ExecContext, &mut Tensor) -> tempra_tensor::Result<()>,
    ) -> Result<Var> {
        let ctx = self.ag.ctx();
        if let Some(arena) = self.arena.as_deref_mut() {
            if let Some(target) = arena.target(slot, dims)? {
                op(ctx, target)?;
                return Ok(Var::constant(target.clone()));
            }
            arena.count_pool_output();
        }
        let mut fresh = ctx.output(dims, dtype)?;
        op(ctx, &mut fresh)?;
        Ok(Var::constant(fresh))
    }

    /// `slot` viewed as `dims` (or a fresh pool output), filled one span of rows at a
    /// time: `each(i, at, ctx, rows)` writes rows `at..at + lens[i]` of it (a batched
    /// step's per-session attention, without a concatenation).
    pub(crate) fn write_spans(
        &mut self,
        slot: Slot,
        dims: &[usize],
        lens: &[usize],
        mut each: impl FnMut(usize, usize, &ExecContext, &mut Tensor) -> Result<()>,
    ) -> Result<Var> {
        let (mut span_dims, rank) = with_last(dims, dims[dims.len() - 1]);
        let row_elems: usize = dims[1..].iter().product();
        let mut result = Ok(());
        let whole = self.write(slot, dims, DType::F32, |ctx, out| {
            let mut at = 0;
            for (i, &t) in lens.iter().enumerate() {
                span_dims[0] = t;
                out.set_view(at * row_elems, &span_dims[..rank])?;
                if let Err(e) = each(i, at, ctx, out) {
                    result = Err(e);
                    break;
                }
                at += t;
            }
            out.set_view(0, dims)
        })?;
        result.map(|()| whole)
    }

    /// A step's token ids or positions (`data`) in their slot.
    pub(crate) fn ids(&mut self, slot: Slot, data: &[u32]) -> Result<Tensor> {
        let var = self.write(slot, &[data.len()], DType::U32, |ctx, out| {
            ctx.write_from_slice(data, out)
        })?;
        Ok(var.into_tensor())
    }

    /// Rows of `table` picked by `ids`.
    pub(crate) fn embedding(&mut self, slot: Slot, table: &Var, ids: &Tensor) -> Result<Var> {
        if tracking(&[table]) {
            return Ok(self.ag.embedding(table, ids)?);
        }
        let (dims, rank) = with_last(&[ids.elem_count(), 0], table.dims()[1]);
        self.write(slot, &dims[..rank], DType::F32, |ctx, out| {
            ctx.embedding_into(table.tensor(), ids, out)
        })
    }

    /// `x · s`.
    pub(crate) fn mul_scalar(&mut self, slot: Slot, x: &Var, s: f64) -> Result<Var> {
        self.scalar(slot, BinaryOp::Mul, x, s)
    }

    /// `op(x, s)` for a scalar `s`.
    pub(crate) fn scalar(&mut self, slot: Slot, op: BinaryOp, x: &Var, s: f64) -> Result<Var> {
        if tracking(&[x]) {
            return Ok(self.ag.binary_scalar(op, x, s)?);
        }
        self.write(slot, x.dims(), x.dtype(), |ctx, out| {
            ctx.binary_scalar_into(op, x.tensor(), s, out)
        })
    }

    /// `op(x)`.
    pub(crate) fn unary(&mut self, slot: Slot, op: UnaryOp, x: &Var) -> Result<Var> {
        if tracking(&[x]) {
            return Ok(self.ag.unary(op, x)?);
        }
        self.write(slot, x.dims(), x.dtype(), |ctx, out| {
            ctx.unary_into(op, x.tensor(), out)
        })
    }

    /// RMS norm of `x` by `w`.
    pub(crate) fn rms_norm(&mut self, slot: Slot, x: &Var, w: &Var, eps: f64) -> Result<Var> {
        if tracking(&[x, w]) {
            return Ok(self.ag.rms_norm(x, w, eps)?);
        }
        self.write(slot, x.dims(), x.dtype(), |ctx, out| {
            ctx.rms_norm_into(x.tensor(), w.tensor(), eps, out)
        })
    }

    /// Layer norm of `x` by weight `w` and bias `b`.
    pub(crate) fn layer_norm(
        &mut self,
        slot: Slot,
        x: &Var,
        w: &Var,
        b: &Var,
        eps: f64,
    ) -> Result<Var> {
        if tracking(&[x, w, b]) {
            return Ok(self.ag.layer_norm(x, w, Some(b), eps)?);
        }
        self.write(slot, x.dims(), x.dtype(), |ctx, out| {
            ctx.layer_norm_into(x.tensor(), w.tensor(), Some(b.tensor()), eps, out)
        })
    }

    /// `x · wᵀ (+ b)`.
    pub(crate) fn linear(&mut self, slot: Slot, x: &Var, w: &Var, b: Option<&Var>) -> Result<Var> {
        let tracked = match b {
            Some(b) => tracking(&[x, w, b]),
            None => tracking(&[x, w]),
        };
        if tracked {
            return Ok(self.ag.linear(x, w, b)?);
        }
        let (dims, rank) = with_last(x.dims(), w.dims()[0]);
        self.write(slot, &dims[..rank], x.dtype(), |ctx, out| {
            ctx.linear_into(x.tensor(), w.tensor(), b.map(Var::tensor), out)
        })
    }

    /// Softmax of `x` along its last dim.
    pub(crate) fn softmax(&mut self, slot: Slot, x: &Var) -> Result<Var> {
        if tracking(&[x]) {
            return Ok(self.ag.softmax(x)?);
        }
        self.write(slot, x.dims(), x.dtype(), |ctx, out| {
            ctx.softmax_into(x.tensor(), out)
        })
    }

    /// Σ of `x` along its last dim, kept as a dim of 1.
    pub(crate) fn sum_last(&mut self, slot: Slot, x: &Var) -> Result<Var> {
        let dim = x.rank() - 1;
        if tracking(&[x]) {
            return Ok(self.ag.sum(x, dim, true)?);
        }
        let (dims, rank) = with_last(x.dims(), 1);
        self.write(slot, &dims[..rank], x.dtype(), |ctx, out| {
            ctx.reduce_into(ReduceOp::Sum, x.tensor(), dim, out)
        })
    }

    /// The `k` largest values along `x`'s last dim (into `values`) and their indices
    /// (U32, into `indices`).
    pub(crate) fn top_k(
        &mut self,
        values: Slot,
        indices: Slot,
        x: &Var,
        k: usize,
    ) -> Result<(Var, Tensor)> {
        if tracking(&[x]) {
            return Ok(self.ag.top_k(x, k)?);
        }
        let (dims, rank) = with_last(x.dims(), k);
        let dims = &dims[..rank];
        let ctx = self.ag.ctx();
        let taken = match self.arena.as_deref_mut() {
            Some(arena) => arena.take_target(indices, dims)?,
            None => None,
        };
        let from_arena = taken.is_some();
        let mut ids = match taken {
            Some(buffer) => buffer,
            None => {
                if let Some(arena) = self.arena.as_deref_mut() {
                    arena.count_pool_output();
                }
                ctx.output(dims, DType::U32)?
            }
        };
        let written = self.write(values, dims, x.dtype(), |ctx, out| {
            ctx.top_k_into(x.tensor(), k, out, &mut ids)
        });
        let returned = ids.clone();
        if let Some(arena) = self.arena.as_deref_mut()
            && from_arena
        {
            arena.restore(indices, ids);
        }
        Ok((written?, returned))
    }

    /// The grouped-expert product of `x [T, k or 1, K]` by the experts `w [E, N, K]`
    /// chosen by `ids [T, k]` → `[T, k, N]`.
    pub(crate) fn expert_linear(
        &mut self,
        slot: Slot,
        x: &Var,
        w: &Var,
        ids: &Tensor,
        bias: Option<&Var>,
    ) -> Result<Var> {
        let tracked = match bias {
            Some(b) => tracking(&[x, w, b]),
            None => tracking(&[x, w]),
        };
        if tracked {
            return Ok(self.ag.expert_linear(x, w, ids, bias)?);
        }
        let dims = [ids.dims()[0], ids.dims()[1], w.dims()[1]];
        self.write(slot, &dims, x.dtype(), |ctx, out| {
            ctx.expert_linear_into(x.tensor(), w.tensor(), ids, bias.map(Var::tensor), out)
        })
    }

    /// `Σ_s weights[.., s] · x[.., s, :]`.
    pub(crate) fn weighted_sum(&mut self, slot: Slot, x: &Var, weights: &Var) -> Result<Var> {
        if tracking(&[x, weights]) {
            return Ok(self.ag.weighted_sum(x, weights)?);
        }
        let r = x.rank();
        let (dims, rank) = with_last(&x.dims()[..r - 1], x.dims()[r - 1]);
        self.write(slot, &dims[..rank], x.dtype(), |ctx, out| {
            ctx.weighted_sum_into(x.tensor(), weights.tensor(), out)
        })
    }

    /// Rope of `x` at `positions`.
    pub(crate) fn rope(
        &mut self,
        slot: Slot,
        x: &Var,
        positions: &Tensor,
        rope: &RopeConfig,
        freqs: Option<&Tensor>,
    ) -> Result<Var> {
        if tracking(&[x]) {
            return Ok(self.ag.rope(x, positions, rope, freqs)?);
        }
        self.write(slot, x.dims(), x.dtype(), |ctx, out| {
            ctx.rope_into(x.tensor(), positions, rope, freqs, out)
        })
    }

    /// Causal attention of `q` over `k`, `v`, with `sinks` where the layer has them.
    pub(crate) fn attention(
        &mut self,
        slot: Slot,
        (q, k, v): (&Var, &Var, &Var),
        sinks: Option<&Tensor>,
        params: &AttentionParams,
    ) -> Result<Var> {
        if tracking(&[q, k, v]) {
            return Ok(self.ag.attention_with_sinks(q, k, v, sinks, params)?);
        }
        let (dims, rank) = with_last(q.dims(), v.dims()[v.rank() - 1]);
        self.write(slot, &dims[..rank], q.dtype(), |ctx, out| {
            let (q, k, v) = (q.tensor(), k.tensor(), v.tensor());
            ctx.attention_with_sinks_into(q, k, v, sinks, params, out)
        })
    }

    /// `x = op(x, rhs)` in `x`'s own buffer when it is `slot`'s or held by `x` alone
    /// (the residual add, the gated FFN product), else into a fresh output.
    pub(crate) fn assign(&mut self, slot: Slot, op: BinaryOp, x: Var, rhs: &Var) -> Result<Var> {
        if tracking(&[&x, rhs]) {
            return Ok(match op {
                BinaryOp::Add => self.ag.add_inplace(x, rhs)?,
                BinaryOp::Mul => self.ag.mul(&x, rhs)?,
                _ => self.ag.binary(op, &x, rhs)?,
            });
        }
        let ctx = self.ag.ctx();
        let mut x = x.into_tensor();
        if let Some(arena) = self.arena.as_deref_mut()
            && let Some(buffer) = arena.holding(slot, &x)
            && buffer.layout() == x.layout()
        {
            drop(x);
            ctx.binary_assign(op, buffer, rhs.tensor())?;
            return Ok(Var::constant(buffer.clone()));
        }
        if x.is_unique() && x.is_contiguous() {
            ctx.binary_assign(op, &mut x, rhs.tensor())?;
            return Ok(Var::constant(x));
        }
        Ok(Var::constant(ctx.binary(op, &x, rhs.tensor())?))
    }
}
