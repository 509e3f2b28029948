//! The transformer ops: rotary position embedding, embedding lookup and causal attention,
//! whose gradients come from the facade's training ops (`rope_inverse`,
//! `embedding_backward`, `attention_backward`).

use tempra_tensor::{AttentionParams, RopeConfig, Tensor};

use crate::autograd::Autograd;
use crate::error::{AutogradError, Result};
use crate::node::{record, rule, tracking};
use crate::var::Var;

impl Autograd {
    /// Rotary position embedding of `x [.., T, H, D]` at U32 `positions [T]`; the
    /// gradient is the inverse rotation. See [`tempra_tensor::ExecContext::rope`].
    pub fn rope(
        &self,
        x: &Var,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
    ) -> Result<Var> {
        let out = self.ctx.rope(&x.tensor, positions, config, freq_factors)?;
        Ok(record(out, "rope", &[x], |_| {
            let (positions, config, ff) = (positions.clone(), *config, freq_factors.cloned());
            rule(move |c, g, _| {
                Ok(vec![Some(c.rope_inverse(
                    &g,
                    &positions,
                    &config,
                    ff.as_ref(),
                )?)])
            })
        }))
    }

    /// Rows of `table [V, D]` picked by U32 `ids [..]` → `[.., D]`; the table's gradient
    /// scatter-adds rows (repeated ids accumulate). A block-quantized table must be a
    /// constant.
    pub fn embedding(&self, table: &Var, ids: &Tensor) -> Result<Var> {
        if table.requires_grad() && table.dtype().is_quantized() {
            return Err(AutogradError::NotDifferentiable {
                op: "embedding",
                what: format!(
                    "a {} table (quantized tables must be constants)",
                    table.dtype()
                ),
            });
        }
        let out = self.ctx.embedding(&table.tensor, ids)?;
        Ok(record(out, "embedding", &[table], |_| {
            let (ids, vocab) = (ids.clone(), table.dims()[0]);
            rule(move |c, g, _| Ok(vec![Some(c.embedding_backward(&ids, &g, vocab)?)]))
        }))
    }

    /// Causal attention with grouped KV heads, optional sliding window and soft-cap:
    /// `q [.., Tq, Hq, D]`, `k [.., Tk, Hkv, D]`, `v [.., Tk, Hkv, Dv]` → `[.., Tq, Hq, Dv]`.
    /// The backward recomputes the probabilities (no score matrix is kept), so the node
    /// retains only q, k and v.
    pub fn attention(&self, q: &Var, k: &Var, v: &Var, params: &AttentionParams) -> Result<Var> {
        let out = self
            .ctx
            .attention(&q.tensor, &k.tensor, &v.tensor, params)?;
        Ok(record(out, "attention", &[q, k, v], |_| {
            let (q, k, v, params) = (
                q.tensor.clone(),
                k.tensor.clone(),
                v.tensor.clone(),
                *params,
            );
            rule(move |c, g, _| {
                let (dq, dk, dv) = c.attention_backward(&q, &k, &v, &params, &g)?;
                Ok(vec![Some(dq), Some(dk), Some(dv)])
            })
        }))
    }

    /// [`Self::attention`] with attention sinks `[Hq]` where given (see
    /// [`tempra_tensor::ExecContext::attention_with_sinks`]); `None` is
    /// [`Self::attention`]. Sinks are inference-only: with a tracked q, k or v it is
    /// [`AutogradError::NotDifferentiable`].
    pub fn attention_with_sinks(
        &self,
        q: &Var,
        k: &Var,
        v: &Var,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
    ) -> Result<Var> {
        let Some(sinks) = sinks else {
            return self.attention(q, k, v, params);
        };
        if tracking(&[q, k, v]) {
            return Err(AutogradError::NotDifferentiable {
                op: "attention",
                what: "q, k or v of attention with sinks (inference-only)".into(),
            });
        }
        let out =
            self.ctx
                .attention_with_sinks(&q.tensor, &k.tensor, &v.tensor, Some(sinks), params)?;
        Ok(Var::constant(out))
    }
}
