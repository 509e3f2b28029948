//! `expert_linear`: the grouped-expert product of a mixture of experts (ggml's
//! `mul_mat_id`), each token's row multiplied by the weights of the experts routing chose
//! for it.

use crate::context::linalg::linear_dtype;
use crate::context::routing::first_out_of_range;
use crate::context::{Dest, ExecContext, fresh, rename_op, shape_for};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

impl ExecContext {
    /// `out [T, k, N]` with row `(t, s)` = `x[t, s] · w[e]ᵀ (+ bias[e])` for
    /// `e = ids[t, s]`: the stacked expert weights `w [E, N, K]` of any float or block
    /// dtype (GGUF's `ffn_{gate,up,down}_exps`, each expert's `[N, K]` as
    /// [`linear`](Self::linear) reads it, or that stack from
    /// [`prepare_weight`](Self::prepare_weight)), `x [T, k, K]` or `[T, 1, K]` (one row
    /// per token, used for each of its `k` slots), U32 `ids [T, k]` and an optional
    /// `bias [E, N]`. `x` is F32 (F64 only with an F64 weight) and `bias` of the output's
    /// dtype, as in `linear`. An expert id ≥ E in host memory is an error naming its
    /// token and slot.
    ///
    /// A row's output is the same bits as `linear(x[t, s], w.select(0, e), ..)` on the
    /// same backend, whichever other rows and experts the call has, and each chosen
    /// expert's weights are read once per call (backends group the rows by expert).
    pub fn expert_linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
    ) -> Result<Tensor> {
        fresh(
            "expert_linear",
            self.expert_linear_to(x, w, ids, bias, Dest::Pool),
        )
    }

    /// [`Self::expert_linear`] into `out` (`[T, k, N]`, F32 or F64; see the output rule of
    /// [`crate::Backend`]).
    pub fn expert_linear_into(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        self.expert_linear_to(x, w, ids, bias, Dest::Into(out))
            .map(drop)
    }

    fn expert_linear_to(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        const OP: &str = "expert_linear";
        let dtype = linear_dtype(OP, x, w)?;
        if w.rank() != 3 {
            return Err(TensorError::Rank {
                op: OP,
                rank: w.rank(),
                what: "3 for the expert weights [E, N, K]",
            });
        }
        if x.rank() != 3 {
            return Err(TensorError::Rank {
                op: OP,
                rank: x.rank(),
                what: "3 for the input [T, k, K] or [T, 1, K]",
            });
        }
        if ids.dtype() != DType::U32 {
            return Err(TensorError::DType {
                op: OP,
                dtype: ids.dtype(),
                what: "u32 expert ids",
            });
        }
        if ids.rank() != 2 {
            return Err(TensorError::Rank {
                op: OP,
                rank: ids.rank(),
                what: "2 for the expert ids [T, k]",
            });
        }
        let (experts, n, k) = (w.dims()[0], w.dims()[1], w.dims()[2]);
        let (tokens, slots) = (ids.dims()[0], ids.dims()[1]);
        let x_slots = x.dims()[1];
        if x.dims()[0] != tokens || x.dims()[2] != k || !(x_slots == slots || x_slots == 1) {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *x.shape(),
                rhs: *w.shape(),
            });
        }
        if let Some(bias) = bias {
            if bias.dims() != [experts, n] {
                return Err(TensorError::ShapeMismatch {
                    op: OP,
                    lhs: *bias.shape(),
                    rhs: *w.shape(),
                });
            }
            if bias.dtype() != dtype {
                return Err(TensorError::DTypeMismatch {
                    op: OP,
                    lhs: bias.dtype(),
                    rhs: dtype,
                });
            }
        }
        if let Some((position, id)) = first_out_of_range(ids, experts)? {
            return Err(TensorError::Argument {
                op: OP,
                name: "ids",
                reason: format!(
                    "expert {id} of token {}, slot {} is out of range for {experts} experts",
                    position / slots.max(1),
                    position % slots.max(1)
                ),
            });
        }
        let x = x
            .broadcast_to(&[tokens, slots, k])
            .map_err(|e| rename_op(e, OP))?;
        let shape = shape_for(OP, &[tokens, slots, n])?;
        let inputs = [&x, w, ids, bias.unwrap_or(&x)];
        self.run_op(OP, shape, dtype, dest, &inputs, |b, out| {
            b.expert_linear(&x, w, ids, bias, out)
        })
    }
}
