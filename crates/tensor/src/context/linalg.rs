//! Matrix products: batched `matmul` and `linear` (x·wᵀ, weights of any dtype).

use crate::context::{Dest, ExecContext, fresh, rename_op};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::broadcast_shapes;
use crate::shape::Shape;
use crate::tensor::Tensor;

/// The output dtype of a product of `a` and `b`: F64 for two F64s, F32 for any mix of
/// F32/F16/BF16.
fn product_dtype(op: &'static str, a: DType, b: DType) -> Result<DType> {
    const HALF_OR_F32: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
    match (a, b) {
        (DType::F64, DType::F64) => Ok(DType::F64),
        (a, b) if HALF_OR_F32.contains(&a) && HALF_OR_F32.contains(&b) => Ok(DType::F32),
        (a, b) if HALF_OR_F32.contains(&a) || a == DType::F64 => Err(TensorError::DType {
            op,
            dtype: b,
            what: "f32/f16/bf16 (or f64 with f64)",
        }),
        (a, _) => Err(TensorError::DType {
            op,
            dtype: a,
            what: "f32/f16/bf16 (or f64 with f64)",
        }),
    }
}

/// The output dtype of a product of input `x` with weight `w` (`linear`,
/// `expert_linear`): F32 for an F32 input and any float or block weight but F64; F64 for
/// two F64s.
pub(crate) fn linear_dtype(op: &'static str, x: &Tensor, w: &Tensor) -> Result<DType> {
    match (x.dtype(), w.dtype()) {
        (DType::F64, DType::F64) => Ok(DType::F64),
        (DType::F32, w) if w != DType::F64 && !matches!(w, DType::I32 | DType::U32 | DType::U8) => {
            Ok(DType::F32)
        }
        (DType::F32, w) => Err(TensorError::DType {
            op,
            dtype: w,
            what: "a float or block weight",
        }),
        (x, _) => Err(TensorError::DType {
            op,
            dtype: x,
            what: "f32 input (f64 with an f64 weight)",
        }),
    }
}

impl ExecContext {
    /// `a [.., M, K] · b [.., K, N] → [.., M, N]` with broadcast batch dims; strided and
    /// transposed views are used as they are (no copies). F32/F16/BF16 inputs give F32,
    /// F64 inputs give F64.
    pub fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        const OP: &str = "matmul";
        let dtype = product_dtype(OP, a.dtype(), b.dtype())?;
        let (ra, rb) = (a.rank(), b.rank());
        if ra < 2 || rb < 2 {
            return Err(TensorError::Rank {
                op: OP,
                rank: ra.min(rb),
                what: "at least 2 for both inputs",
            });
        }
        let (m, k) = (a.dims()[ra - 2], a.dims()[ra - 1]);
        let (k2, n) = (b.dims()[rb - 2], b.dims()[rb - 1]);
        if k != k2 {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *a.shape(),
                rhs: *b.shape(),
            });
        }
        let batch = broadcast_shapes(
            OP,
            &Shape::new(&a.dims()[..ra - 2])?,
            &Shape::new(&b.dims()[..rb - 2])?,
        )
        .map_err(|_| TensorError::Broadcast {
            op: OP,
            lhs: *a.shape(),
            rhs: *b.shape(),
        })?;
        let with = |x: usize, y: usize| -> Result<Vec<usize>> {
            let mut dims = batch.dims().to_vec();
            dims.extend([x, y]);
            Ok(dims)
        };
        let a = a.broadcast_to(&with(m, k)?).map_err(|e| rename_op(e, OP))?;
        let b = b.broadcast_to(&with(k, n)?).map_err(|e| rename_op(e, OP))?;
        let mut out = self.alloc(OP, Shape::new(&with(m, n)?)?, dtype)?;
        self.backend.matmul(&a, &b, &mut out)?;
        Ok(out)
    }

    /// `x [.., K] · wᵀ (+ bias) → [.., N]` for a weight `w [N, K]` of any float or block
    /// dtype (quantized weights as GGUF stores them). `x` is F32 (F64 only with an F64
    /// weight); `bias` is `[N]` of `x`'s dtype.
    pub fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        fresh("linear", self.linear_to(x, w, bias, Dest::Pool))
    }

    /// [`Self::linear`] into `out` (`[.., N]`, F32 or F64 as `linear` returns; see the
    /// output rule of [`crate::Backend`]).
    pub fn linear_into(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        self.linear_to(x, w, bias, Dest::Into(out)).map(drop)
    }

    fn linear_to(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        const OP: &str = "linear";
        let dtype = linear_dtype(OP, x, w)?;
        if w.rank() != 2 {
            return Err(TensorError::Rank {
                op: OP,
                rank: w.rank(),
                what: "2 for the weight [N, K]",
            });
        }
        if x.rank() == 0 {
            return Err(TensorError::Rank {
                op: OP,
                rank: 0,
                what: "at least 1 for the input",
            });
        }
        let (n, k) = (w.dims()[0], w.dims()[1]);
        if x.shape().last() != k {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: *x.shape(),
                rhs: *w.shape(),
            });
        }
        if let Some(bias) = bias {
            if bias.dims() != [n] {
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
        let mut shape = *x.shape();
        let last = shape.rank() - 1;
        shape.dims_mut()[last] = n;
        let inputs = [x, w, bias.unwrap_or(x)];
        self.run_op(OP, shape, dtype, dest, &inputs, |b, out| {
            b.linear(x, w, bias, out)
        })
    }

    /// The weight `w [N, K]` (or the stacked expert weights `[E, N, K]` of
    /// [`expert_linear`](Self::expert_linear)) in the layout this context's backend
    /// multiplies fastest in [`linear`](Self::linear) (`expert_linear`), or `None` when
    /// `w` is best kept as it is (see
    /// [`Backend::prepare_weight`](crate::Backend::prepare_weight)). Only for weights
    /// that are used by nothing but those products: the copy may be in a layout only the
    /// backend's products read directly (other ops and backends read it converted back,
    /// see [`PreparedStorage`](crate::PreparedStorage)). A prepared stack's expert `e`,
    /// `w.select(0, e)`, is a `linear` weight of that layout.
    pub fn prepare_weight(&self, w: &Tensor) -> Result<Option<Tensor>> {
        if !matches!(w.rank(), 2 | 3) {
            return Err(TensorError::Rank {
                op: "prepare_weight",
                rank: w.rank(),
                what: "2 for a weight [N, K] or 3 for expert weights [E, N, K]",
            });
        }
        self.backend.prepare_weight(w)
    }
}
