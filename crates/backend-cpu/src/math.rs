//! Vectorised approximations of the transcendental functions, written once over [`Simd`].
//!
//! Cephes-style range reduction plus minimax polynomials, evaluated with FMA where the
//! ISA has it. The largest relative errors against f64, measured on dense sweeps by
//! `math::tests` (numbers in the crate README), are a few f32 ulps: about 1.2e-7 for
//! `exp` and `log`, 2.4e-7 for `tanh`, `sigmoid`, `silu`, `gelu` (x ≥ -1), growing in
//! `gelu`'s far negative tail where the function itself is ill-conditioned.
//! NaN propagates, ±∞ and underflow give the limits (`exp(-∞) = 0`, `exp(∞) = ∞`,
//! `log(0) = -∞`, `log(x < 0) = NaN`), subnormal results and inputs are handled.

use crate::simd::Simd;

/// `eˣ`.
#[inline(always)]
pub(crate) fn exp<S: Simd>(s: S, x: S::V) -> S::V {
    // Clamp so that n fits the split scaling below; NaN passes through (`max`/`min`
    // return their second operand on NaN).
    let x = s.min(s.splat(100.0), s.max(s.splat(-110.0), x));
    let n = s.round(s.mul(x, s.splat(std::f32::consts::LOG2_E)));
    // r = x - n·ln2, with ln2 split in a high part (0.693359375, 9 bits: n·hi is exact)
    // and a low correction.
    let r = s.mul_add(n, s.splat(-0.693_359_4), x);
    let r = s.mul_add(n, s.splat(2.121_944_4e-4), r);
    let r2 = s.mul(r, r);
    let mut p = s.splat(1.987_569_1e-4);
    p = s.mul_add(p, r, s.splat(1.398_199_9e-3));
    p = s.mul_add(p, r, s.splat(8.333_452e-3));
    p = s.mul_add(p, r, s.splat(4.166_579_6e-2));
    p = s.mul_add(p, r, s.splat(1.666_666_5e-1));
    p = s.mul_add(p, r, s.splat(0.5));
    let p = s.add(s.mul_add(p, r2, r), s.splat(1.0));
    // 2ⁿ as 2^⌊n/2⌋ · 2^(n-⌊n/2⌋): both factors stay normal for n in [-159, 145], so
    // results overflow to ∞ and underflow through the subnormals to 0 correctly.
    let n1 = s.floor(s.mul(n, s.splat(0.5)));
    let n2 = s.sub(n, n1);
    s.mul(s.mul(p, s.pow2i(n1)), s.pow2i(n2))
}

/// `ln x`.
#[inline(always)]
pub(crate) fn log<S: Simd>(s: S, x: S::V) -> S::V {
    // Subnormal inputs: scale into the normal range first.
    let tiny = s.lt(x, s.splat(f32::MIN_POSITIVE));
    let xs = s.select(tiny, s.mul(x, s.splat(8_388_608.0)), x); // 2^23
    let (m, e) = s.frexp(xs);
    let e = s.select(tiny, s.sub(e, s.splat(23.0)), e);
    // m in [0.5, 1): move to [√½, √2) so the polynomial argument is small.
    let small = s.lt(m, s.splat(std::f32::consts::FRAC_1_SQRT_2));
    let e = s.select(small, s.sub(e, s.splat(1.0)), e);
    let m = s.select(small, s.add(m, m), m);
    let f = s.sub(m, s.splat(1.0));
    let z = s.mul(f, f);
    let mut y = s.splat(7.037_683_6e-2);
    y = s.mul_add(y, f, s.splat(-1.151_461e-1));
    y = s.mul_add(y, f, s.splat(1.167_699_9e-1));
    y = s.mul_add(y, f, s.splat(-1.242_014_1e-1));
    y = s.mul_add(y, f, s.splat(1.424_932_3e-1));
    y = s.mul_add(y, f, s.splat(-1.666_805_8e-1));
    y = s.mul_add(y, f, s.splat(2.000_071_4e-1));
    y = s.mul_add(y, f, s.splat(-2.499_999_4e-1));
    y = s.mul_add(y, f, s.splat(3.333_333e-1));
    let y = s.mul(s.mul(y, f), z);
    let y = s.mul_add(e, s.splat(-2.121_944_4e-4), y);
    let y = s.mul_add(z, s.splat(-0.5), y);
    let r = s.mul_add(e, s.splat(0.693_359_4), s.add(f, y));
    // Special inputs: x < 0 or NaN → NaN, 0 → -∞, +∞ → +∞.
    let zero = s.splat(0.0);
    let r = s.select(s.lt(x, zero), s.splat(f32::NAN), r);
    let r = s.select(s.eq(x, zero), s.splat(f32::NEG_INFINITY), r);
    let r = s.select(s.eq(x, s.splat(f32::INFINITY)), x, r);
    s.select(s.unord(x, x), x, r)
}

/// `tanh x`.
#[inline(always)]
pub(crate) fn tanh<S: Simd>(s: S, x: S::V) -> S::V {
    let a = s.abs(x);
    // |x| < 0.625: odd polynomial (Cephes tanhf).
    let z = s.mul(x, x);
    let mut p = s.splat(-5.704_988_7e-3);
    p = s.mul_add(p, z, s.splat(2.063_909e-2));
    p = s.mul_add(p, z, s.splat(-5.373_971_6e-2));
    p = s.mul_add(p, z, s.splat(1.333_144_2e-1));
    p = s.mul_add(p, z, s.splat(-3.333_328e-1));
    let small = s.mul_add(s.mul(p, z), x, x);
    // Otherwise 1 - 2/(e^{2|x|} + 1) with x's sign; e^{2|x|} = ∞ gives exactly ±1.
    let e = exp(s, s.add(a, a));
    let large = s.sub(s.splat(1.0), s.div(s.splat(2.0), s.add(e, s.splat(1.0))));
    let large = s.copysign(large, x);
    s.select(s.lt(a, s.splat(0.625)), small, large)
}

/// `1 / (1 + e⁻ˣ)`.
#[inline(always)]
pub(crate) fn sigmoid<S: Simd>(s: S, x: S::V) -> S::V {
    let one = s.splat(1.0);
    s.div(one, s.add(one, exp(s, s.neg(x))))
}

/// `x · sigmoid(x)`.
#[inline(always)]
pub(crate) fn silu<S: Simd>(s: S, x: S::V) -> S::V {
    s.div(x, s.add(s.splat(1.0), exp(s, s.neg(x))))
}

/// GELU, tanh form: `0.5x(1 + tanh(u))` with `u = √(2/π)(x + 0.044715x³)`, computed as
/// `x · sigmoid(2u)` (the same function) so large negative `x` keeps its relative
/// accuracy instead of cancelling in `1 + tanh`.
#[inline(always)]
pub(crate) fn gelu_tanh<S: Simd>(s: S, x: S::V) -> S::V {
    const TWO_SQRT_2_OVER_PI: f32 = 2.0 * 0.797_884_6;
    let x3 = s.mul(s.mul(x, x), x);
    let u2 = s.mul(
        s.mul_add(x3, s.splat(0.044_715), x),
        s.splat(TWO_SQRT_2_OVER_PI),
    );
    s.div(x, s.add(s.splat(1.0), exp(s, s.neg(u2))))
}

/// GELU, erf form: `0.5x(1 + erf(x/√2))`, as `0.5x·erfc(-x/√2)` for negative `x` and
/// `x(1 - 0.5·erfc(x/√2))` otherwise, with the Chebyshev-fitted `erfc` of Numerical
/// Recipes (fractional error < 1.2e-7 for every argument).
#[inline(always)]
pub(crate) fn gelu_erf<S: Simd>(s: S, x: S::V) -> S::V {
    // erfc(|x|/√2) underflows to 0 beyond |x| ≈ 14; clamping keeps x² finite for ±∞.
    let ax = s.min(s.abs(x), s.splat(17.0));
    let z = s.mul(ax, s.splat(std::f32::consts::FRAC_1_SQRT_2));
    let one = s.splat(1.0);
    let t = s.div(one, s.mul_add(s.splat(0.5), z, one));
    let mut p = s.splat(0.170_872_77);
    p = s.mul_add(p, t, s.splat(-0.822_152_2));
    p = s.mul_add(p, t, s.splat(1.488_515_9));
    p = s.mul_add(p, t, s.splat(-1.135_204));
    p = s.mul_add(p, t, s.splat(0.278_868_07));
    p = s.mul_add(p, t, s.splat(-0.186_288_06));
    p = s.mul_add(p, t, s.splat(0.096_784_18));
    p = s.mul_add(p, t, s.splat(0.374_091_96));
    p = s.mul_add(p, t, s.splat(1.000_023_7));
    p = s.mul_add(p, t, s.splat(-1.265_512_2));
    // erfc(z) = t·exp(-z² + p), with z² = x²/2 taken from x (not the rounded z) and split
    // into its rounded value and rounding error (exact with FMA), so large |x| keeps its
    // relative accuracy.
    let half = s.splat(0.5);
    let xx = s.mul(ax, ax);
    let zz = s.mul(xx, half);
    let zz_err = s.mul(s.mul_add(ax, ax, s.neg(xx)), half);
    let erfc = s.mul(t, exp(s, s.sub(p, zz)));
    let erfc = s.mul(erfc, s.sub(one, zz_err));
    let half_x = s.mul(x, s.splat(0.5));
    let negative = s.lt(x, s.splat(0.0));
    let pos = s.mul(x, s.mul_add(erfc, s.splat(-0.5), one));
    s.select(negative, s.mul(half_x, erfc), pos)
}

/// `(sin x, cos x)` for `|x| ≤ π` (callers reduce larger angles first, in f64): Cephes
/// `sinf`/`cosf` polynomials on `[-π/4, π/4]` after a quadrant reduction; absolute error
/// below 1e-7.
#[inline(always)]
pub(crate) fn sin_cos<S: Simd>(s: S, x: S::V) -> (S::V, S::V) {
    let j = s.round(s.mul(x, s.splat(std::f32::consts::FRAC_2_PI)));
    // y = x - j·π/2 with π/2 split in three parts (Cody-Waite), exact for small j.
    let y = s.mul_add(j, s.splat(-1.570_312_5), x);
    let y = s.mul_add(j, s.splat(-4.837_513e-4), y);
    let y = s.mul_add(j, s.splat(-7.549_789_5e-8), y);
    let z = s.mul(y, y);
    let mut ps = s.splat(-1.951_529_6e-4);
    ps = s.mul_add(ps, z, s.splat(8.332_161e-3));
    ps = s.mul_add(ps, z, s.splat(-1.666_665_5e-1));
    let sin_y = s.mul_add(s.mul(ps, z), y, y);
    let mut pc = s.splat(2.443_315_7e-5);
    pc = s.mul_add(pc, z, s.splat(-1.388_731_6e-3));
    pc = s.mul_add(pc, z, s.splat(4.166_664_6e-2));
    let cos_y = s.add(
        s.mul_add(s.splat(-0.5), z, s.splat(1.0)),
        s.mul(s.mul(pc, z), z),
    );
    // Quadrant q = j mod 4: q = 1, 3 swap sin and cos; q = 2, 3 negate sin; q = 1, 2
    // negate cos.
    let q = s.sub(j, s.mul(s.floor(s.mul(j, s.splat(0.25))), s.splat(4.0)));
    let (one, two) = (s.splat(1.0), s.splat(2.0));
    let odd = s.eq(s.sub(q, s.mul(s.floor(s.mul(q, s.splat(0.5))), two)), one);
    let sin = s.select(odd, cos_y, sin_y);
    let cos = s.select(odd, sin_y, cos_y);
    let sin = s.select(s.lt(q, two), sin, s.neg(sin));
    let cos_negative = s.lt(s.abs(s.sub(q, s.splat(1.5))), one); // q = 1 or 2
    let cos = s.select(cos_negative, s.neg(cos), cos);
    (sin, cos)
}

#[cfg(test)]
mod tests {
    //! Accuracy of the approximations, measured through the unary row kernel on every ISA
    //! this CPU has, against `UnaryOp::apply` in f64 (the reference semantics). Run with
    //! `--nocapture` to see the table quoted in the README.

    use tempra_tensor::UnaryOp;

    use crate::isa::{Isa, Level};
    use crate::kernels::elementwise::unary;

    /// Largest relative error of `op` over `n` points of `[lo, hi]` on `level`, ignoring
    /// references below `floor` in magnitude (compared absolutely there).
    fn max_rel_err(level: Level, op: UnaryOp, lo: f32, hi: f32, floor: f64) -> f64 {
        let n = 400_000;
        let x: Vec<f32> = (0..=n)
            .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
            .collect();
        let mut y = vec![0f32; x.len()];
        unary(level, op, &x, &mut y);
        x.iter()
            .zip(&y)
            .map(|(&x, &got)| {
                let want = reference(op, x as f64);
                (got as f64 - want).abs() / want.abs().max(floor)
            })
            .fold(0.0, f64::max)
    }

    /// `op` in f64: `UnaryOp::apply`, except GELU-tanh in its `x·sigmoid(2u)` form, which
    /// is the same function without `apply`'s cancellation in `1 + tanh(u)` for x ≪ 0.
    fn reference(op: UnaryOp, x: f64) -> f64 {
        match op {
            UnaryOp::GeluTanh => {
                let u = 0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x);
                x / (1.0 + (-2.0 * u).exp())
            }
            _ => op.apply(x),
        }
    }

    /// (op, range, bound on the relative error).
    const CASES: [(UnaryOp, f32, f32, f64); 9] = [
        (UnaryOp::Exp, -87.0, 88.5, 2.5e-7),
        (UnaryOp::Log, 1e-30, 1e3, 2.5e-7),
        (UnaryOp::Log, 0.5, 2.0, 2.5e-7),
        (UnaryOp::Tanh, -12.0, 12.0, 4e-7),
        (UnaryOp::Sigmoid, -80.0, 80.0, 4e-7),
        (UnaryOp::Silu, -80.0, 80.0, 4e-7),
        (UnaryOp::GeluTanh, -1.0, 10.0, 4e-7),
        (UnaryOp::GeluTanh, -10.0, 10.0, 2e-5),
        (UnaryOp::GeluErf, -5.0, 10.0, 3e-6),
    ];

    #[test]
    fn approximations_are_accurate_on_every_isa() {
        for isa in Isa::available() {
            let level = Level::new(isa).unwrap();
            for (op, lo, hi, bound) in CASES {
                let err = max_rel_err(level, op, lo, hi, 1e-30);
                println!(
                    "{isa:>6} {:>9} [{lo:>6}, {hi:>5}]: max rel err {err:.2e}",
                    op.name()
                );
                assert!(
                    err < bound,
                    "{isa} {} on [{lo}, {hi}]: {err:e} ≥ {bound:e}",
                    op.name()
                );
            }
        }
    }

    #[test]
    fn sin_cos_is_accurate_on_every_isa() {
        for isa in Isa::available() {
            let level = Level::new(isa).unwrap();
            let n = 100_000;
            let x: Vec<f32> = (0..=n)
                .map(|i| -3.2 + 6.4 * (i as f32 / n as f32))
                .collect();
            let (mut sin, mut cos) = (vec![0f32; x.len()], vec![0f32; x.len()]);
            crate::kernels::rope::sin_cos(level, &x, &mut sin, &mut cos);
            let err = x
                .iter()
                .zip(sin.iter().zip(&cos))
                .map(|(&x, (&s, &c))| {
                    ((s as f64 - (x as f64).sin()).abs()).max((c as f64 - (x as f64).cos()).abs())
                })
                .fold(0.0, f64::max);
            println!("{isa:>6}   sin_cos [  -3.2,   3.2]: max abs err {err:.2e}");
            assert!(err < 2e-7, "{isa} sin_cos abs err {err:e}");
        }
    }

    #[test]
    fn limits_and_special_values() {
        for isa in Isa::available() {
            let level = Level::new(isa).unwrap();
            let run = |op: UnaryOp, x: f32| {
                let mut y = [0f32];
                unary(level, op, &[x], &mut y);
                y[0]
            };
            assert_eq!(run(UnaryOp::Exp, f32::NEG_INFINITY), 0.0);
            assert_eq!(run(UnaryOp::Exp, -200.0), 0.0);
            assert_eq!(run(UnaryOp::Exp, f32::INFINITY), f32::INFINITY);
            assert_eq!(run(UnaryOp::Exp, 89.0), f32::INFINITY);
            assert!(run(UnaryOp::Exp, f32::NAN).is_nan());
            // Subnormal results: within two subnormal steps of the truth.
            let sub = run(UnaryOp::Exp, -100.0) as f64;
            assert!((sub - (-100f64).exp()).abs() <= 2.0 * 1.5e-45, "{sub:e}");
            assert_eq!(run(UnaryOp::Log, 0.0), f32::NEG_INFINITY);
            assert!(run(UnaryOp::Log, -1.0).is_nan());
            assert!(run(UnaryOp::Log, f32::NAN).is_nan());
            assert_eq!(run(UnaryOp::Log, f32::INFINITY), f32::INFINITY);
            assert!((run(UnaryOp::Log, 1e-40) as f64 - 1e-40f64.ln()).abs() < 1e-5);
            assert!(run(UnaryOp::Tanh, f32::NAN).is_nan());
            assert_eq!(run(UnaryOp::Tanh, f32::INFINITY), 1.0);
            assert_eq!(run(UnaryOp::Tanh, f32::NEG_INFINITY), -1.0);
            assert_eq!(run(UnaryOp::GeluErf, f32::INFINITY), f32::INFINITY);
        }
    }
}
