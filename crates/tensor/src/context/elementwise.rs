//! Elementwise ops: unary, binary with broadcasting, scalar variants, in-place updates.

use crate::context::{
    COMPUTE_FLOATS, Dest, ExecContext, check_output, expect_dtype, expect_same_dtype, fresh,
    rename_op,
};
use crate::error::{Result, TensorError};
use crate::layout::broadcast_shapes;
use crate::op_kinds::{BinaryOp, UnaryOp};
use crate::tensor::Tensor;

impl ExecContext {
    /// `op(x)` elementwise (F32 or F64).
    pub fn unary(&self, op: UnaryOp, x: &Tensor) -> Result<Tensor> {
        fresh(op.name(), self.unary_to(op, x, Dest::Pool))
    }

    /// [`Self::unary`] into `out` (`x`'s shape and dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn unary_into(&self, op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<()> {
        self.unary_to(op, x, Dest::Into(out)).map(drop)
    }

    fn unary_to(&self, op: UnaryOp, x: &Tensor, dest: Dest<'_>) -> Result<Option<Tensor>> {
        expect_dtype(op.name(), x, COMPUTE_FLOATS, "f32 or f64")?;
        self.run_op(op.name(), *x.shape(), x.dtype(), dest, &[x], |b, out| {
            b.unary(op, x, out)
        })
    }

    /// `op(a, b)` elementwise with numpy broadcasting (F32 or F64, same dtype).
    pub fn binary(&self, op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        fresh(op.name(), self.binary_to(op, a, b, Dest::Pool))
    }

    /// [`Self::binary`] into `out` (the broadcast shape; see the output rule of
    /// [`crate::Backend`]).
    pub fn binary_into(
        &self,
        op: BinaryOp,
        a: &Tensor,
        b: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        self.binary_to(op, a, b, Dest::Into(out)).map(drop)
    }

    /// `a = op(a, b)` in `a`'s own buffer, `b` broadcast to `a`'s shape (a residual add
    /// into a step arena's hidden state). `a` must be a valid output (see the output rule
    /// of [`crate::Backend`]) and not overlap `b`.
    pub fn binary_assign(&self, op: BinaryOp, a: &mut Tensor, b: &Tensor) -> Result<()> {
        let name = op.name();
        expect_dtype(name, a, COMPUTE_FLOATS, "f32 or f64")?;
        expect_same_dtype(name, a, b)?;
        let shape = broadcast_shapes(name, a.shape(), b.shape())?;
        check_output(name, a, &shape, a.dtype(), &[b])?;
        let b = b
            .broadcast_to(shape.dims())
            .map_err(|e| rename_op(e, name))?;
        self.backend.binary_inplace(op, a, &b)
    }

    fn binary_to(
        &self,
        op: BinaryOp,
        a: &Tensor,
        b: &Tensor,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        let name = op.name();
        expect_dtype(name, a, COMPUTE_FLOATS, "f32 or f64")?;
        expect_same_dtype(name, a, b)?;
        let shape = broadcast_shapes(name, a.shape(), b.shape())?;
        let a = a
            .broadcast_to(shape.dims())
            .map_err(|e| rename_op(e, name))?;
        let b = b
            .broadcast_to(shape.dims())
            .map_err(|e| rename_op(e, name))?;
        self.run_op(name, shape, a.dtype(), dest, &[&a, &b], |be, out| {
            be.binary(op, &a, &b, out)
        })
    }

    /// `op(a, b)` reusing `a`'s buffer when `a` is its storage's only holder, contiguous,
    /// writable and already of the broadcast shape (a residual add); otherwise the same as
    /// [`Self::binary`]. A shared buffer is never written.
    pub fn binary_inplace(&self, op: BinaryOp, mut a: Tensor, b: &Tensor) -> Result<Tensor> {
        let name = op.name();
        expect_dtype(name, &a, COMPUTE_FLOATS, "f32 or f64")?;
        expect_same_dtype(name, &a, b)?;
        let shape = broadcast_shapes(name, a.shape(), b.shape())?;
        let writable = matches!(
            a.storage(),
            crate::Storage::Pooled(_) | crate::Storage::Owned(_)
        );
        if shape == *a.shape() && a.is_contiguous() && a.is_unique() && writable {
            let b = b
                .broadcast_to(shape.dims())
                .map_err(|e| rename_op(e, name))?;
            self.backend.binary_inplace(op, &mut a, &b)?;
            return Ok(a);
        }
        self.binary(op, &a, b)
    }

    /// `op(x, scalar)` elementwise.
    pub fn binary_scalar(&self, op: BinaryOp, x: &Tensor, scalar: f64) -> Result<Tensor> {
        fresh(op.name(), self.binary_scalar_to(op, x, scalar, Dest::Pool))
    }

    /// [`Self::binary_scalar`] into `out` (`x`'s shape and dtype; see the output rule of
    /// [`crate::Backend`]).
    pub fn binary_scalar_into(
        &self,
        op: BinaryOp,
        x: &Tensor,
        scalar: f64,
        out: &mut Tensor,
    ) -> Result<()> {
        self.binary_scalar_to(op, x, scalar, Dest::Into(out))
            .map(drop)
    }

    fn binary_scalar_to(
        &self,
        op: BinaryOp,
        x: &Tensor,
        scalar: f64,
        dest: Dest<'_>,
    ) -> Result<Option<Tensor>> {
        expect_dtype(op.name(), x, COMPUTE_FLOATS, "f32 or f64")?;
        self.run_op(op.name(), *x.shape(), x.dtype(), dest, &[x], |b, out| {
            b.binary_scalar(op, x, scalar, out)
        })
    }

    /// `a + b` (broadcasting).
    pub fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a - b` (broadcasting).
    pub fn sub(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a · b` elementwise (broadcasting).
    pub fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b` elementwise (broadcasting).
    pub fn div(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `max(a, b)` elementwise (broadcasting).
    pub fn maximum(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Maximum, a, b)
    }

    /// `min(a, b)` elementwise (broadcasting).
    pub fn minimum(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Minimum, a, b)
    }

    /// `a + b`, in place in `a`'s buffer when that is safe. See [`Self::binary_inplace`].
    pub fn add_inplace(&self, a: Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary_inplace(BinaryOp::Add, a, b)
    }

    /// `x + s`.
    pub fn add_scalar(&self, x: &Tensor, s: f64) -> Result<Tensor> {
        self.binary_scalar(BinaryOp::Add, x, s)
    }

    /// `x · s`.
    pub fn mul_scalar(&self, x: &Tensor, s: f64) -> Result<Tensor> {
        self.binary_scalar(BinaryOp::Mul, x, s)
    }

    /// `x / s`.
    pub fn div_scalar(&self, x: &Tensor, s: f64) -> Result<Tensor> {
        if s == 0.0 {
            return Err(TensorError::Argument {
                op: "div_scalar",
                name: "s",
                reason: "division by zero".into(),
            });
        }
        self.binary_scalar(BinaryOp::Div, x, s)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl ExecContext {
            $(
                $(#[$doc])*
                pub fn $name(&self, x: &Tensor) -> Result<Tensor> {
                    self.unary(UnaryOp::$op, x)
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`.
    neg => Neg,
    /// `|x|`.
    abs => Abs,
    /// `x²`.
    sqr => Sqr,
    /// `1/x`.
    recip => Recip,
    /// `eˣ`.
    exp => Exp,
    /// `ln x`.
    log => Log,
    /// `√x`.
    sqrt => Sqrt,
    /// `1/√x`.
    rsqrt => Rsqrt,
    /// `tanh x`.
    tanh => Tanh,
    /// `1/(1+e⁻ˣ)`.
    sigmoid => Sigmoid,
    /// `max(x, 0)`.
    relu => Relu,
    /// `x·sigmoid(x)`.
    silu => Silu,
    /// GELU, tanh approximation.
    gelu => GeluTanh,
    /// GELU, exact (erf) form.
    gelu_erf => GeluErf,
}
