//! Elementwise row kernels: unary ops, binary ops (with a broadcast scalar operand), and
//! in-place updates, on contiguous f32 slices.

use tempra_tensor::{BinaryOp, UnaryOp};

use crate::math;
use crate::simd::{Simd, simd_dispatch};

/// One operand of a binary row: a contiguous slice, or one value broadcast along the row.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Operand<'a> {
    /// A contiguous slice of the row's length.
    Row(&'a [f32]),
    /// One value for every element (stride 0).
    Splat(f32),
}

/// `y[i] = f(x[i])` over a contiguous row, with `$v` bound to a vector of `x`.
macro_rules! map1 {
    ($s:ident, $x:expr, $y:expr, |$v:ident| $body:expr) => {{
        let (x, y): (&[f32], &mut [f32]) = ($x, $y);
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &mut y[..n]);
        let mut xc = x.chunks_exact(S::LANES);
        let mut yc = y.chunks_exact_mut(S::LANES);
        for (xv, yv) in (&mut xc).zip(&mut yc) {
            let $v = $s.load(xv);
            $s.store(yv, $body);
        }
        let (xr, yr) = (xc.remainder(), yc.into_remainder());
        if !xr.is_empty() {
            let $v = $s.load_partial(xr, 1.0);
            $s.store_partial(yr, $body);
        }
    }};
}

/// `y[i] = f(y[i])` in place, with `$v` bound to a vector of `y`.
macro_rules! update1 {
    ($s:ident, $y:expr, |$v:ident| $body:expr) => {{
        let y: &mut [f32] = $y;
        let mut yc = y.chunks_exact_mut(S::LANES);
        for yv in &mut yc {
            let $v = $s.load(yv);
            $s.store(yv, $body);
        }
        let yr = yc.into_remainder();
        if !yr.is_empty() {
            let $v = $s.load_partial(yr, 1.0);
            $s.store_partial(yr, $body);
        }
    }};
}

/// `y[i] = f(a[i], b[i])` with `$a`, `$b` bound to vectors.
macro_rules! map2 {
    ($s:ident, $a:expr, $b:expr, $y:expr, |$va:ident, $vb:ident| $body:expr) => {{
        let (a, b, y): (&[f32], &[f32], &mut [f32]) = ($a, $b, $y);
        let n = y.len().min(a.len()).min(b.len());
        let (a, b, y) = (&a[..n], &b[..n], &mut y[..n]);
        let mut ac = a.chunks_exact(S::LANES);
        let mut bc = b.chunks_exact(S::LANES);
        let mut yc = y.chunks_exact_mut(S::LANES);
        for ((av, bv), yv) in (&mut ac).zip(&mut bc).zip(&mut yc) {
            let ($va, $vb) = ($s.load(av), $s.load(bv));
            $s.store(yv, $body);
        }
        let (ar, br, yr) = (ac.remainder(), bc.remainder(), yc.into_remainder());
        if !ar.is_empty() {
            let ($va, $vb) = ($s.load_partial(ar, 1.0), $s.load_partial(br, 1.0));
            $s.store_partial(yr, $body);
        }
    }};
}

/// `op` on one vector.
#[inline(always)]
pub(crate) fn unary_vec<S: Simd>(s: S, op: UnaryOp, v: S::V) -> S::V {
    match op {
        UnaryOp::Neg => s.neg(v),
        UnaryOp::Abs => s.abs(v),
        UnaryOp::Sqr => s.mul(v, v),
        UnaryOp::Recip => s.div(s.splat(1.0), v),
        UnaryOp::Exp => math::exp(s, v),
        UnaryOp::Log => math::log(s, v),
        UnaryOp::Sqrt => s.sqrt(v),
        UnaryOp::Rsqrt => s.div(s.splat(1.0), s.sqrt(v)),
        UnaryOp::Tanh => math::tanh(s, v),
        UnaryOp::Sigmoid => math::sigmoid(s, v),
        // `max` returns its second operand on NaN: NaN stays NaN, as in the reference.
        UnaryOp::Relu => s.max(s.splat(0.0), v),
        UnaryOp::Silu => math::silu(s, v),
        UnaryOp::GeluTanh => math::gelu_tanh(s, v),
        UnaryOp::GeluErf => math::gelu_erf(s, v),
    }
}

/// `op` on two vectors (max/min propagate NaN like the reference).
#[inline(always)]
pub(crate) fn binary_vec<S: Simd>(s: S, op: BinaryOp, a: S::V, b: S::V) -> S::V {
    match op {
        BinaryOp::Add => s.add(a, b),
        BinaryOp::Sub => s.sub(a, b),
        BinaryOp::Mul => s.mul(a, b),
        BinaryOp::Div => s.div(a, b),
        BinaryOp::Maximum => s.max_nan(a, b),
        BinaryOp::Minimum => s.min_nan(a, b),
    }
}

/// `y = op(x)` over a contiguous row. Each op gets its own loop (the `match` is outside).
#[inline(always)]
pub(crate) fn unary_row<S: Simd>(s: S, op: UnaryOp, x: &[f32], y: &mut [f32]) {
    match op {
        UnaryOp::Neg => map1!(s, x, y, |v| s.neg(v)),
        UnaryOp::Abs => map1!(s, x, y, |v| s.abs(v)),
        UnaryOp::Sqr => map1!(s, x, y, |v| s.mul(v, v)),
        UnaryOp::Relu => map1!(s, x, y, |v| s.max(s.splat(0.0), v)),
        UnaryOp::Exp => map1!(s, x, y, |v| math::exp(s, v)),
        UnaryOp::Tanh => map1!(s, x, y, |v| math::tanh(s, v)),
        UnaryOp::Silu => map1!(s, x, y, |v| math::silu(s, v)),
        UnaryOp::GeluTanh => map1!(s, x, y, |v| math::gelu_tanh(s, v)),
        UnaryOp::Sigmoid => map1!(s, x, y, |v| math::sigmoid(s, v)),
        other => map1!(s, x, y, |v| unary_vec(s, other, v)),
    }
}

/// `y = op(y)` in place.
#[inline(always)]
pub(crate) fn unary_row_inplace<S: Simd>(s: S, op: UnaryOp, y: &mut [f32]) {
    update1!(s, y, |v| unary_vec(s, op, v));
}

/// `y = op(a, b)` over a row; either operand may be a broadcast scalar.
#[inline(always)]
pub(crate) fn binary_row<S: Simd>(
    s: S,
    op: BinaryOp,
    a: Operand<'_>,
    b: Operand<'_>,
    y: &mut [f32],
) {
    match (a, b) {
        (Operand::Row(a), Operand::Row(b)) => match op {
            BinaryOp::Add => map2!(s, a, b, y, |va, vb| s.add(va, vb)),
            BinaryOp::Mul => map2!(s, a, b, y, |va, vb| s.mul(va, vb)),
            other => map2!(s, a, b, y, |va, vb| binary_vec(s, other, va, vb)),
        },
        (Operand::Row(a), Operand::Splat(b)) => {
            let vb = s.splat(b);
            map1!(s, a, y, |va| binary_vec(s, op, va, vb));
        }
        (Operand::Splat(a), Operand::Row(b)) => {
            let va = s.splat(a);
            map1!(s, b, y, |vb| binary_vec(s, op, va, vb));
        }
        (Operand::Splat(a), Operand::Splat(b)) => {
            let v = binary_vec(s, op, s.splat(a), s.splat(b));
            let mut one = [0.0f32; 16];
            s.store_partial(&mut one[..1], v);
            y.fill(one[0]);
        }
    }
}

/// `y = op(y, b)` in place; `b` may be a broadcast scalar.
#[inline(always)]
pub(crate) fn binary_row_inplace<S: Simd>(s: S, op: BinaryOp, y: &mut [f32], b: Operand<'_>) {
    match b {
        Operand::Row(b) => {
            let n = y.len().min(b.len());
            let (y, b) = (&mut y[..n], &b[..n]);
            let mut yc = y.chunks_exact_mut(S::LANES);
            let mut bc = b.chunks_exact(S::LANES);
            for (yv, bv) in (&mut yc).zip(&mut bc) {
                let r = binary_vec(s, op, s.load(yv), s.load(bv));
                s.store(yv, r);
            }
            let (yr, br) = (yc.into_remainder(), bc.remainder());
            if !yr.is_empty() {
                let r = binary_vec(s, op, s.load_partial(yr, 1.0), s.load_partial(br, 1.0));
                s.store_partial(yr, r);
            }
        }
        Operand::Splat(b) => {
            let vb = s.splat(b);
            update1!(s, y, |v| binary_vec(s, op, v, vb));
        }
    }
}

simd_dispatch! {
    /// `y = op(x)` over a contiguous row.
    pub(crate) fn unary(op: UnaryOp, x: &[f32], y: &mut [f32]) -> () = unary_row;
    /// `y = op(y)` in place.
    pub(crate) fn unary_inplace(op: UnaryOp, y: &mut [f32]) -> () = unary_row_inplace;
    /// `y = op(a, b)` over a row.
    pub(crate) fn binary(op: BinaryOp, a: Operand<'_>, b: Operand<'_>, y: &mut [f32]) -> () = binary_row;
    /// `y = op(y, b)` in place.
    pub(crate) fn binary_inplace(op: BinaryOp, y: &mut [f32], b: Operand<'_>) -> () = binary_row_inplace;
}
