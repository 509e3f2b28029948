//! Elementwise ops: unary, binary (broadcasting; the engine sums gradients back to each
//! input's shape), scalar variants and the in-place residual add.

use tempra_tensor::{BinaryOp, ExecContext, Tensor, UnaryOp};

use crate::autograd::Autograd;
use crate::error::Result;
use crate::node::{record, rule, tracking};
use crate::ops::masks::{add_into, mul_into, positive, scalar_minus, sign, sub_into};
use crate::var::Var;

/// Whether `op`'s derivative is written in terms of its output (else its input).
fn derivative_uses_output(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Recip
            | UnaryOp::Exp
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::Relu
    )
}

/// `g · op'(x)`, given `saved` = the output or the input as [`derivative_uses_output`] says.
fn unary_grad(c: &ExecContext, op: UnaryOp, saved: &Tensor, g: Tensor) -> Result<Tensor> {
    let d = match op {
        UnaryOp::Neg => return Ok(c.neg(&g)?),
        UnaryOp::Abs => sign(c, saved)?,
        UnaryOp::Sqr => c.mul_scalar(saved, 2.0)?,
        // d(1/x) = −y²
        UnaryOp::Recip => c.mul_scalar(&c.sqr(saved)?, -1.0)?,
        UnaryOp::Exp => return mul_into(c, g, saved),
        UnaryOp::Log => return Ok(c.div(&g, saved)?),
        // d√x = 1/(2y)
        UnaryOp::Sqrt => return Ok(c.div(&c.mul_scalar(&g, 0.5)?, saved)?),
        // d(x^-½) = −½ y³
        UnaryOp::Rsqrt => {
            let y3 = mul_into(c, c.sqr(saved)?, saved)?;
            c.mul_scalar(&y3, -0.5)?
        }
        // 1 − y²
        UnaryOp::Tanh => scalar_minus(c, 1.0, &c.sqr(saved)?)?,
        // y (1 − y)
        UnaryOp::Sigmoid => mul_into(c, scalar_minus(c, 1.0, saved)?, saved)?,
        UnaryOp::Relu => positive(c, saved)?,
        // σ (1 + x (1 − σ))
        UnaryOp::Silu => {
            let s = c.sigmoid(saved)?;
            let t = mul_into(c, scalar_minus(c, 1.0, &s)?, saved)?;
            let t = c.add_scalar(&t, 1.0)?;
            mul_into(c, t, &s)?
        }
        UnaryOp::GeluTanh => gelu_tanh_derivative(c, saved)?,
        UnaryOp::GeluErf => gelu_erf_derivative(c, saved)?,
    };
    mul_into(c, d, &g)
}

/// d/dx of `0.5x(1 + tanh(k(x + a x³)))`:
/// `0.5(1 + t) + 0.5 x (1 − t²) k (1 + 3a x²)` with `t = tanh(k(x + a x³))`.
fn gelu_tanh_derivative(c: &ExecContext, x: &Tensor) -> Result<Tensor> {
    const K: f64 = 0.797_884_560_802_865_4; // √(2/π)
    const A: f64 = 0.044_715;
    let x2 = c.sqr(x)?;
    let inner = c.add_scalar(&c.mul_scalar(&x2, A)?, 1.0)?; // 1 + a x²
    let u = mul_into(c, c.mul_scalar(&inner, K)?, x)?;
    let t = c.tanh(&u)?;
    let left = c.add_scalar(&c.mul_scalar(&t, 0.5)?, 0.5)?;
    let sech2 = scalar_minus(c, 1.0, &c.sqr(&t)?)?;
    let dinner = c.add_scalar(&c.mul_scalar(&x2, 3.0 * A * K)?, K)?; // k (1 + 3a x²)
    let right = mul_into(c, mul_into(c, c.mul_scalar(x, 0.5)?, &sech2)?, &dinner)?;
    add_into(c, left, &right)
}

/// d/dx of `x Φ(x)` = `Φ(x) + x φ(x)`. The facade has no erf, so Φ comes from the op
/// itself: `Φ = gelu(x)·x / max(x², ε) + ½(1 − x²/max(x², ε))`, which is `gelu(x)/x` away
/// from 0 and ½ within `|x| < √ε`.
fn gelu_erf_derivative(c: &ExecContext, x: &Tensor) -> Result<Tensor> {
    const EPS: f64 = 1e-30;
    const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
    let y = c.gelu_erf(x)?;
    let x2 = c.sqr(x)?;
    let m = c.binary_scalar(BinaryOp::Maximum, &x2, EPS)?;
    let cdf = c.div(&mul_into(c, y, x)?, &m)?;
    let ratio = c.div(&x2, &m)?;
    let correction = c.mul_scalar(&scalar_minus(c, 1.0, &ratio)?, 0.5)?;
    let cdf = add_into(c, cdf, &correction)?;
    let pdf = c.mul_scalar(&c.exp(&c.mul_scalar(&x2, -0.5)?)?, INV_SQRT_2PI)?;
    let right = mul_into(c, pdf, x)?;
    add_into(c, cdf, &right)
}

/// `(∂/∂a, ∂/∂b)` of `op(a, b)` given the output gradient, in the broadcast shape.
fn binary_grads(
    c: &ExecContext,
    op: BinaryOp,
    a: Option<&Tensor>,
    b: Option<&Tensor>,
    g: Tensor,
    need: (bool, bool),
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let missing = || crate::AutogradError::GraphConsumed { op: op.name() };
    Ok(match op {
        BinaryOp::Add => (need.0.then(|| g.clone()), need.1.then_some(g)),
        BinaryOp::Sub => (
            need.0.then(|| g.clone()),
            if need.1 { Some(c.neg(&g)?) } else { None },
        ),
        BinaryOp::Mul => {
            let ga = if need.0 {
                Some(c.mul(&g, b.ok_or_else(missing)?)?)
            } else {
                None
            };
            let gb = if need.1 {
                Some(mul_into(c, g, a.ok_or_else(missing)?)?)
            } else {
                None
            };
            (ga, gb)
        }
        BinaryOp::Div => {
            let b = b.ok_or_else(missing)?;
            let ga = c.div(&g, b)?;
            // ∂/∂b = −g·a/b² = −(g/b)·(a/b)
            let gb = if need.1 {
                let ab = c.div(a.ok_or_else(missing)?, b)?;
                Some(c.neg(&c.mul(&ga, &ab)?)?)
            } else {
                None
            };
            (need.0.then_some(ga), gb)
        }
        BinaryOp::Maximum | BinaryOp::Minimum => {
            let (a, b) = (a.ok_or_else(missing)?, b.ok_or_else(missing)?);
            // a wins where a > b (maximum) or a < b (minimum); ties go to b.
            let diff = if op == BinaryOp::Maximum {
                c.sub(a, b)?
            } else {
                c.sub(b, a)?
            };
            let ga = mul_into(c, positive(c, &diff)?, &g)?;
            let gb = if need.1 {
                Some(sub_into(c, g, &ga)?)
            } else {
                None
            };
            (need.0.then_some(ga), gb)
        }
    })
}

impl Autograd {
    /// `op(x)` elementwise. See [`ExecContext::unary`].
    pub fn unary(&self, op: UnaryOp, x: &Var) -> Result<Var> {
        let y = self.ctx.unary(op, &x.tensor)?;
        Ok(record(y, op.name(), &[x], |y| {
            let saved = match op {
                UnaryOp::Neg => None,
                op if derivative_uses_output(op) => Some(y.clone()),
                _ => Some(x.tensor.clone()),
            };
            rule(move |c, g, _| {
                let grad = match &saved {
                    Some(s) => unary_grad(c, op, s, g)?,
                    None => c.neg(&g)?,
                };
                Ok(vec![Some(grad)])
            })
        }))
    }

    /// `op(a, b)` elementwise with broadcasting. See [`ExecContext::binary`].
    pub fn binary(&self, op: BinaryOp, a: &Var, b: &Var) -> Result<Var> {
        let out = self.ctx.binary(op, &a.tensor, &b.tensor)?;
        Ok(record(out, op.name(), &[a, b], |_| {
            let (need_a, need_b) = (a.requires_grad(), b.requires_grad());
            let (keep_a, keep_b) = match op {
                BinaryOp::Add | BinaryOp::Sub => (false, false),
                BinaryOp::Mul => (need_b, need_a),
                BinaryOp::Div => (need_b, true),
                BinaryOp::Maximum | BinaryOp::Minimum => (true, true),
            };
            let sa = keep_a.then(|| a.tensor.clone());
            let sb = keep_b.then(|| b.tensor.clone());
            rule(move |c, g, need| {
                let (ga, gb) =
                    binary_grads(c, op, sa.as_ref(), sb.as_ref(), g, (need[0], need[1]))?;
                Ok(vec![ga, gb])
            })
        }))
    }

    /// `op(x, scalar)` elementwise. See [`ExecContext::binary_scalar`].
    pub fn binary_scalar(&self, op: BinaryOp, x: &Var, scalar: f64) -> Result<Var> {
        let out = self.ctx.binary_scalar(op, &x.tensor, scalar)?;
        Ok(record(out, op.name(), &[x], |_| {
            let saved =
                matches!(op, BinaryOp::Maximum | BinaryOp::Minimum).then(|| x.tensor.clone());
            rule(move |c, g, _| {
                let grad = match op {
                    BinaryOp::Add | BinaryOp::Sub => g,
                    BinaryOp::Mul => c.mul_scalar(&g, scalar)?,
                    BinaryOp::Div => c.mul_scalar(&g, 1.0 / scalar)?,
                    BinaryOp::Maximum | BinaryOp::Minimum => {
                        let x = saved
                            .as_ref()
                            .ok_or(crate::AutogradError::GraphConsumed { op: op.name() })?;
                        // x passes where x > s (maximum) or x < s (minimum).
                        let sign = if op == BinaryOp::Maximum { 1.0 } else { -1.0 };
                        let shifted = c.mul_scalar(&c.add_scalar(x, -scalar)?, sign)?;
                        mul_into(c, positive(c, &shifted)?, &g)?
                    }
                };
                Ok(vec![Some(grad)])
            })
        }))
    }

    /// `a + b` (broadcasting).
    pub fn add(&self, a: &Var, b: &Var) -> Result<Var> {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a − b` (broadcasting).
    pub fn sub(&self, a: &Var, b: &Var) -> Result<Var> {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a · b` elementwise (broadcasting).
    pub fn mul(&self, a: &Var, b: &Var) -> Result<Var> {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b` elementwise (broadcasting).
    pub fn div(&self, a: &Var, b: &Var) -> Result<Var> {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `max(a, b)` elementwise (broadcasting); on ties the gradient goes to `b`.
    pub fn maximum(&self, a: &Var, b: &Var) -> Result<Var> {
        self.binary(BinaryOp::Maximum, a, b)
    }

    /// `min(a, b)` elementwise (broadcasting); on ties the gradient goes to `b`.
    pub fn minimum(&self, a: &Var, b: &Var) -> Result<Var> {
        self.binary(BinaryOp::Minimum, a, b)
    }

    /// `a + b`, written into `a`'s buffer when `a` is its storage's only holder (a residual
    /// add that allocates nothing); otherwise the same as [`Self::add`]. Safe while
    /// recording too: `a` is consumed, and a buffer some rule saved is shared, so never
    /// overwritten.
    pub fn add_inplace(&self, a: Var, b: &Var) -> Result<Var> {
        if !tracking(&[&a, b]) {
            return Ok(Var::constant(self.ctx.add_inplace(a.tensor, &b.tensor)?));
        }
        let Var { tensor, node } = a;
        let out = self.ctx.add_inplace(tensor, &b.tensor)?;
        let a_node = Var {
            tensor: out.clone(),
            node,
        };
        Ok(record(out, "add", &[&a_node, b], |_| {
            rule(move |_, g, need| Ok(vec![need[0].then(|| g.clone()), need[1].then_some(g)]))
        }))
    }

    /// `x + s`.
    pub fn add_scalar(&self, x: &Var, s: f64) -> Result<Var> {
        self.binary_scalar(BinaryOp::Add, x, s)
    }

    /// `x · s`.
    pub fn mul_scalar(&self, x: &Var, s: f64) -> Result<Var> {
        self.binary_scalar(BinaryOp::Mul, x, s)
    }

    /// `x / s` (an error for `s = 0`).
    pub fn div_scalar(&self, x: &Var, s: f64) -> Result<Var> {
        if s == 0.0 {
            // The facade names the problem.
            self.ctx.div_scalar(&x.tensor, s)?;
        }
        self.binary_scalar(BinaryOp::Div, x, s)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Autograd {
            $(
                $(#[$doc])*
                pub fn $name(&self, x: &Var) -> Result<Var> {
                    self.unary(UnaryOp::$op, x)
                }
            )*
        }
    };
}

unary_methods! {
    /// `−x`.
    neg => Neg,
    /// `|x|` (gradient 0 at 0).
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
    /// `max(x, 0)` (gradient 0 at 0).
    relu => Relu,
    /// `x·sigmoid(x)`.
    silu => Silu,
    /// GELU, tanh approximation.
    gelu => GeluTanh,
    /// GELU, exact (erf) form.
    gelu_erf => GeluErf,
}
