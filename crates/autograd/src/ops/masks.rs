//! 0/1 masks and signs composed from facade ops (the facade has no comparison ops): the
//! pieces of the relu, abs, maximum/minimum and gelu gradients.

use tempra_tensor::{BinaryOp, DType, ExecContext, Tensor};

use crate::error::Result;

/// The smallest positive normal value of `dtype` (F32 or F64).
fn tiny(dtype: DType) -> f64 {
    if dtype == DType::F64 {
        f64::MIN_POSITIVE
    } else {
        f32::MIN_POSITIVE as f64
    }
}

/// 1 where `t > 0`, else 0: `relu(t) / max(relu(t), tiny)`, exact for every `t` outside
/// the subnormal range `(0, tiny)`.
pub(crate) fn positive(c: &ExecContext, t: &Tensor) -> Result<Tensor> {
    let r = c.relu(t)?;
    let m = c.binary_scalar(BinaryOp::Maximum, &r, tiny(t.dtype()))?;
    Ok(c.binary_inplace(BinaryOp::Div, r, &m)?)
}

/// −1, 0 or 1 by the sign of `t`: `t / max(|t|, tiny)`.
pub(crate) fn sign(c: &ExecContext, t: &Tensor) -> Result<Tensor> {
    let a = c.abs(t)?;
    let m = c.binary_scalar(BinaryOp::Maximum, &a, tiny(t.dtype()))?;
    Ok(c.div(t, &m)?)
}

/// `a · b`, reusing `a`'s buffer when it is unshared.
#[inline]
pub(crate) fn mul_into(c: &ExecContext, a: Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(c.binary_inplace(BinaryOp::Mul, a, b)?)
}

/// `a + b`, reusing `a`'s buffer when it is unshared.
#[inline]
pub(crate) fn add_into(c: &ExecContext, a: Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(c.binary_inplace(BinaryOp::Add, a, b)?)
}

/// `a − b`, reusing `a`'s buffer when it is unshared.
#[inline]
pub(crate) fn sub_into(c: &ExecContext, a: Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(c.binary_inplace(BinaryOp::Sub, a, b)?)
}

/// `s − t` for a scalar `s`.
pub(crate) fn scalar_minus(c: &ExecContext, s: f64, t: &Tensor) -> Result<Tensor> {
    let neg = c.neg(t)?;
    Ok(c.add_scalar(&neg, s)?)
}

#[cfg(test)]
mod tests {
    use tempra_tensor::ExecContext;

    use super::{positive, sign};

    #[test]
    fn masks_are_exact_outside_the_subnormals() {
        let ctx = ExecContext::reference();
        let v32 = [-3.0f32, -1e-30, 0.0, -0.0, 1e-30, 2.0, f32::MIN_POSITIVE];
        let t = ctx.from_slice(&v32, &[7]).unwrap();
        assert_eq!(
            positive(&ctx, &t).unwrap().to_vec_f32().unwrap(),
            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
        );
        assert_eq!(
            sign(&ctx, &t).unwrap().to_vec_f32().unwrap(),
            [-1.0, -1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
        );
        let v64 = [-1e-300f64, 0.0, 1e-300, 5.0];
        let t = ctx.from_slice(&v64, &[4]).unwrap();
        assert_eq!(
            positive(&ctx, &t).unwrap().to_vec_f64().unwrap(),
            [0.0, 0.0, 1.0, 1.0]
        );
        assert_eq!(
            sign(&ctx, &t).unwrap().to_vec_f64().unwrap(),
            [-1.0, 0.0, 1.0, 1.0]
        );
    }
}
