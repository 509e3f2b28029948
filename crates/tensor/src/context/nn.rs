//! Network ops: rms_norm, layer_norm, rope, embedding, causal attention.

use crate::attention::AttentionParams;
use crate::context::{COMPUTE_FLOATS, Dest, ExecContext, expect_dtype, fresh, shape_for};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::rope::{RopeConfig, RopeScaling};
use crate::shape::Shape;
use crate::tensor::Tensor;

/// The dtypes attention reads keys and values in with f32 queries: floats, and the
/// 32-value block formats of a quantized KV cache.
pub const KV_DTYPES: [DType; 7] = [
    DType::F32,
    DType::F16,
    DType::Q8_0,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
];

/// Float dtypes accepted for norm weights.
const WEIGHT_FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16, DType::F64];

/// Checks a norm's input and its `[D]` parameter.
fn check_norm_param(op: &'static str, x: &Tensor, p: &Tensor) -> Result<()> {
    expect_dtype(op, p, WEIGHT_FLOATS, "a float weight")?;
    if p.dims() != [x.shape().last()] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: *x.shape(),
            rhs: *p.shape(),
        });
    }
    Ok(())
}

fn check_eps(op: &'static str, eps: f64) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(TensorError::Argument {
            op,
            name: "eps",
            reason: format!("{eps} must be finite and ≥ 0"),
        })
    }
}

impl ExecContext {
    /// RMS norm over the last dim: `x / √(mean(x²) + eps) · w`, `w [D]`.
    pub fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
        fresh("rms_norm", self.rms_norm_to(x, w, eps, Dest::Pool))
    }

    /// [`Self::rms_norm`] into `out` (`x`'s shape and dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn rms_norm_into(&self, x: &Tensor, w: &Tensor, eps: f64, out: &mut Tensor) -> Result<()> {
        self.rms_norm_to(x, w, eps, Dest::Into(out)).map(drop)
    }

    fn rms_norm_to(
        &self,
        x: &Tensor,
        w: &Tensor,
        eps: f64,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        const OP: &str = "rms_norm";
        expect_dtype(OP, x, COMPUTE_FLOATS, "f32 or f64")?;
        check_norm_param(OP, x, w)?;
        check_eps(OP, eps)?;
        self.run_op(OP, *x.shape(), x.dtype(), dest, &[x, w], |b, out| {
            b.rms_norm(x, w, eps, out)
        })
    }

    /// Layer norm over the last dim: `(x - mean) / √(var + eps) · w (+ b)`.
    pub fn layer_norm(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        fresh("layer_norm", self.layer_norm_to(x, w, b, eps, Dest::Pool))
    }

    /// [`Self::layer_norm`] into `out` (`x`'s shape and dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn layer_norm_into(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
        out: &mut Tensor,
    ) -> Result<()> {
        self.layer_norm_to(x, w, b, eps, Dest::Into(out)).map(drop)
    }

    fn layer_norm_to(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        const OP: &str = "layer_norm";
        expect_dtype(OP, x, COMPUTE_FLOATS, "f32 or f64")?;
        check_norm_param(OP, x, w)?;
        if let Some(b) = b {
            check_norm_param(OP, x, b)?;
        }
        check_eps(OP, eps)?;
        let inputs: &[&Tensor] = match b {
            Some(b) => &[x, w, b],
            None => &[x, w],
        };
        self.run_op(OP, *x.shape(), x.dtype(), dest, inputs, |be, out| {
            be.layer_norm(x, w, b, eps, out)
        })
    }

    /// Rotary position embedding of `x [.., T, H, D]` at U32 `positions [T]`.
    /// `freq_factors` (F32 `[rotary_dims/2]`, GGUF `rope_freqs`) divides each pair's
    /// frequency.
    pub fn rope(
        &self,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
    ) -> Result<Tensor> {
        let out = self.rope_impl(
            "rope",
            x,
            positions,
            config,
            freq_factors,
            false,
            Dest::Pool,
        );
        fresh("rope", out)
    }

    /// [`Self::rope`] into `out` (`x`'s shape and dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn rope_into(
        &self,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        let dest = Dest::Into(out);
        self.rope_impl("rope", x, positions, config, freq_factors, false, dest)
            .map(drop)
    }

    /// The inverse rotation of [`Self::rope`] (angle −θ): rope's gradient.
    pub fn rope_inverse(
        &self,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
    ) -> Result<Tensor> {
        let dest = Dest::Pool;
        let out = self.rope_impl(
            "rope_inverse",
            x,
            positions,
            config,
            freq_factors,
            true,
            dest,
        );
        fresh("rope_inverse", out)
    }

    fn rope_impl(
        &self,
        op: &'static str,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
        inverse: bool,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        expect_dtype(op, x, COMPUTE_FLOATS, "f32 or f64")?;
        expect_dtype(op, positions, &[DType::U32], "u32 positions")?;
        let r = x.rank();
        if r < 3 {
            return Err(TensorError::Rank {
                op,
                rank: r,
                what: "at least 3: [.., T, H, D]",
            });
        }
        let (t, d) = (x.dims()[r - 3], x.dims()[r - 1]);
        if positions.dims() != [t] {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: *x.shape(),
                rhs: *positions.shape(),
            });
        }
        let rd = config.rotary_dims;
        if rd == 0
            || !rd.is_multiple_of(2)
            || rd > d
            || !(config.theta.is_finite() && config.theta > 0.0)
            || !(config.attention_factor.is_finite() && config.attention_factor > 0.0)
        {
            return Err(TensorError::Argument {
                op,
                name: "config",
                reason: format!(
                    "rotary_dims {rd} must be even, in 2..={d}; theta {} and the attention \
                     factor {} must be finite and > 0",
                    config.theta, config.attention_factor
                ),
            });
        }
        if let RopeScaling::Yarn {
            factor,
            original_max_position,
            beta_fast,
            beta_slow,
            ext_factor,
        } = config.scaling
        {
            let positive = |v: f64| v.is_finite() && v > 0.0;
            let all_positive = [factor, original_max_position, beta_fast, beta_slow]
                .into_iter()
                .all(positive);
            if !all_positive || !ext_factor.is_finite() {
                return Err(TensorError::Argument {
                    op,
                    name: "config",
                    reason: format!(
                        "YaRN needs a factor, original context and betas > 0 and a finite \
                         ext_factor ({:?})",
                        config.scaling
                    ),
                });
            }
        }
        if let Some(ff) = freq_factors {
            expect_dtype(op, ff, &[DType::F32], "f32 freq factors")?;
            if ff.dims() != [rd / 2] {
                return Err(TensorError::ShapeMismatch {
                    op,
                    lhs: Shape::new(&[rd / 2])?,
                    rhs: *ff.shape(),
                });
            }
        }
        let inputs = [x, positions, freq_factors.unwrap_or(x)];
        self.run_op(op, *x.shape(), x.dtype(), dest, &inputs, |b, out| {
            b.rope(x, positions, config, freq_factors, inverse, out)
        })
    }

    /// Rows of `table [V, D]` (any float or block dtype) picked by U32 `ids` → `[.., D]`
    /// (F32; F64 for an F64 table). An id ≥ V is an error naming it.
    pub fn embedding(&self, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
        fresh("embedding", self.embedding_to(table, ids, Dest::Pool))
    }

    /// [`Self::embedding`] into `out` (`[.., D]`; see the output rule of
    /// [`crate::Backend`]).
    pub fn embedding_into(&self, table: &Tensor, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        self.embedding_to(table, ids, Dest::Into(out)).map(drop)
    }

    fn embedding_to(&self, table: &Tensor, ids: &Tensor, dest: Dest<'_>) -> Result<Option<Tensor>> {
        const OP: &str = "embedding";
        expect_dtype(OP, ids, &[DType::U32], "u32 ids")?;
        if table.rank() != 2 {
            return Err(TensorError::Rank {
                op: OP,
                rank: table.rank(),
                what: "2 for the table [V, D]",
            });
        }
        let dtype = match table.dtype() {
            DType::F64 => DType::F64,
            DType::I32 | DType::U32 | DType::U8 => {
                return Err(TensorError::DType {
                    op: OP,
                    dtype: table.dtype(),
                    what: "a float or block table",
                });
            }
            _ => DType::F32,
        };
        // `ids`' dims plus the embedding width, on the stack (no heap per op).
        let mut dims = [0usize; crate::shape::MAX_RANK + 1];
        let rank = ids.rank();
        dims[..rank].copy_from_slice(ids.dims());
        dims[rank] = table.dims()[1];
        let shape = shape_for(OP, &dims[..=rank])?;
        self.run_op(OP, shape, dtype, dest, &[table, ids], |b, out| {
            b.embedding(table, ids, out)
        })
    }

    /// Causal attention with grouped KV heads, an optional sliding window and logit
    /// soft-cap: `q [.., Tq, Hq, D]`, `k [.., Tk, Hkv, D]`, `v [.., Tk, Hkv, Dv]` →
    /// `[.., Tq, Hq, Dv]`. A query that sees no key (its window lies past the last key)
    /// gets zeros. This is the reference form; backends may fuse it.
    pub fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        params: &AttentionParams,
    ) -> Result<Tensor> {
        fresh(
            "attention",
            self.attention_to(q, k, v, None, params, Dest::Pool),
        )
    }

    /// [`Self::attention`] into `out` (`[.., Tq, Hq, Dv]` of `q`'s dtype; see the output
    /// rule of [`crate::Backend`]).
    pub fn attention_into(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        params: &AttentionParams,
        out: &mut Tensor,
    ) -> Result<()> {
        self.attention_to(q, k, v, None, params, Dest::Into(out))
            .map(drop)
    }

    /// [`Self::attention`] with attention sinks where given: `sinks [Hq]` (F32 or q's
    /// dtype) holds per query head one more logit that joins every row's softmax and
    /// carries no value (gpt-oss), so a row's weights sum to less than one. Not scaled,
    /// capped or masked. `None` is [`Self::attention`].
    pub fn attention_with_sinks(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
    ) -> Result<Tensor> {
        fresh(
            "attention",
            self.attention_to(q, k, v, sinks, params, Dest::Pool),
        )
    }

    /// [`Self::attention_with_sinks`] into `out` (see [`Self::attention_into`]).
    pub fn attention_with_sinks_into(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
        out: &mut Tensor,
    ) -> Result<()> {
        self.attention_to(q, k, v, sinks, params, Dest::Into(out))
            .map(drop)
    }

    fn attention_to(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        let shape = self.attention_shape(q, k, v, params)?;
        if let Some(s) = sinks {
            check_sinks(q, s)?;
        }
        self.run_op("attention", shape, q.dtype(), dest, &[q, k, v], |b, out| {
            b.attention(q, k, v, sinks, params, out)
        })
    }

    /// Checks attention's inputs and returns its output dims.
    pub(crate) fn attention_shape(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        params: &AttentionParams,
    ) -> Result<Shape> {
        const OP: &str = "attention";
        expect_dtype(OP, q, COMPUTE_FLOATS, "f32 or f64 queries")?;
        let kv_types: &[DType] = if q.dtype() == DType::F64 {
            &[DType::F64]
        } else {
            &KV_DTYPES
        };
        expect_dtype(
            OP,
            k,
            kv_types,
            "f32/f16/q8_0/q4_0/q4_1/q5_0/q5_1 keys (f64 with f64 queries)",
        )?;
        expect_dtype(
            OP,
            v,
            kv_types,
            "f32/f16/q8_0/q4_0/q4_1/q5_0/q5_1 values (f64 with f64 queries)",
        )?;
        let r = q.rank();
        if r < 3 || k.rank() != r || v.rank() != r {
            return Err(TensorError::Rank {
                op: OP,
                rank: r,
                what: "q, k, v of one rank ≥ 3: [.., T, H, D]",
            });
        }
        let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
        let lead_ok = qd[..r - 3] == kd[..r - 3] && kd[..r - 3] == vd[..r - 3];
        let (hq, hkv, d) = (qd[r - 2], kd[r - 2], qd[r - 1]);
        let kv_ok = kd[r - 1] == d && vd[r - 3] == kd[r - 3] && vd[r - 2] == hkv;
        if !lead_ok || !kv_ok || hkv == 0 || hq % hkv != 0 {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *q.shape(),
                rhs: *k.shape(),
            });
        }
        if kd[r - 3] == 0 || params.window == Some(0) || !params.scale.is_finite() {
            return Err(TensorError::Argument {
                op: OP,
                name: "params",
                reason: format!("needs ≥ 1 key, a window ≥ 1 and a finite scale ({params:?})"),
            });
        }
        if params.softcap.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
            return Err(TensorError::Argument {
                op: OP,
                name: "softcap",
                reason: "must be finite and > 0".into(),
            });
        }
        let mut shape = *q.shape();
        shape.dims_mut()[r - 1] = vd[r - 1];
        Ok(shape)
    }
}

/// Checks attention sinks: one float per query head of `q [.., Tq, Hq, D]`.
fn check_sinks(q: &Tensor, sinks: &Tensor) -> Result<()> {
    const OP: &str = "attention";
    if sinks.dtype() != DType::F32 && sinks.dtype() != q.dtype() {
        return Err(TensorError::Argument {
            op: OP,
            name: "sinks",
            reason: format!("f32 or the queries' dtype expected, got {}", sinks.dtype()),
        });
    }
    let hq = q.dims()[q.rank() - 2];
    if sinks.dims() != [hq] {
        return Err(TensorError::ShapeMismatch {
            op: OP,
            lhs: *q.shape(),
            rhs: *sinks.shape(),
        });
    }
    Ok(())
}
