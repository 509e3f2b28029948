//! Vectorised approximations of the transcendental functions, written once over [`Simd`].
//!
//! Cephes-style range reduction plus minimax polynomials, evaluated with FMA where the
//! ISA has it. Measured against f64 `std` on a dense sweep (`math::tests`), the largest
//! relative errors on f32 inputs are about 1.2e-7 (`exp`, `log`), 2.4e-7 (`tanh`,
//! `sigmoid`, `silu`, `gelu`) and 1e-6 (`gelu_erf`); see the crate README.
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
    // r = x - n·ln2, with ln2 split in a high part exact in f32 and a low correction.
    let r = s.mul_add(n, s.splat(-0.693_359_375), x);
    let r = s.mul_add(n, s.splat(2.121_944_4e-4), r);
    let r2 = s.mul(r, r);
    let mut p = s.splat(1.987_569_1e-4);
    p = s.mul_add(p, r, s.splat(1.398_199_9e-3));
    p = s.mul_add(p, r, s.splat(8.333_452e-3));
    p = s.mul_add(p, r, s.splat(4.166_579_6e-2));
    p = s.mul_add(p, r, s.splat(1.666_666_5e-1));
    p = s.mul_add(p, r, s.splat(5.000_000_1e-1));
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
    let r = s.mul_add(e, s.splat(0.693_359_375), s.add(f, y));
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
    p = s.mul_add(p, z, s.splat(2.063_908_9e-2));
    p = s.mul_add(p, z, s.splat(-5.373_971_6e-2));
    p = s.mul_add(p, z, s.splat(1.333_144_2e-1));
    p = s.mul_add(p, z, s.splat(-3.333_328_2e-1));
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
    let u2 = s.mul(s.mul_add(x3, s.splat(0.044_715), x), s.splat(TWO_SQRT_2_OVER_PI));
    s.div(x, s.add(s.splat(1.0), exp(s, s.neg(u2))))
}

/// GELU, erf form: `0.5x(1 + erf(x/√2))`, as `0.5x·erfc(-x/√2)` for negative `x` and
/// `x(1 - 0.5·erfc(x/√2))` otherwise, with the Chebyshev-fitted `erfc` of Numerical
/// Recipes (fractional error < 1.2e-7 for every argument).
#[inline(always)]
pub(crate) fn gelu_erf<S: Simd>(s: S, x: S::V) -> S::V {
    // erfc(z) underflows to 0 beyond z ≈ 10; clamping keeps z² finite for x = ±∞.
    let z = s.min(s.mul(s.abs(x), s.splat(std::f32::consts::FRAC_1_SQRT_2)), s.splat(12.0));
    let one = s.splat(1.0);
    let t = s.div(one, s.mul_add(s.splat(0.5), z, one));
    let mut p = s.splat(0.170_872_77);
    p = s.mul_add(p, t, s.splat(-0.822_152_2));
    p = s.mul_add(p, t, s.splat(1.488_515_9));
    p = s.mul_add(p, t, s.splat(-1.135_203_9));
    p = s.mul_add(p, t, s.splat(0.278_868_07));
    p = s.mul_add(p, t, s.splat(-0.186_288_06));
    p = s.mul_add(p, t, s.splat(0.096_784_18));
    p = s.mul_add(p, t, s.splat(0.374_091_96));
    p = s.mul_add(p, t, s.splat(1.000_023_7));
    p = s.mul_add(p, t, s.splat(-1.265_512_2));
    // erfc(z) = t·exp(-z² + p). z² is split into its rounded value and the rounding
    // error (exact with FMA) so large z keeps its relative accuracy.
    let zz = s.mul(z, z);
    let zz_err = s.mul_add(z, z, s.neg(zz));
    let erfc = s.mul(t, exp(s, s.sub(p, zz)));
    let erfc = s.mul(erfc, s.sub(one, zz_err));
    let half_x = s.mul(x, s.splat(0.5));
    let negative = s.lt(x, s.splat(0.0));
    let pos = s.mul(x, s.mul_add(erfc, s.splat(-0.5), one));
    s.select(negative, s.mul(half_x, erfc), pos)
}

#[cfg(test)]
mod tests {
    //! Accuracy of the approximations on the scalar token (the vector tokens run the
    //! same arithmetic; their agreement is checked in the integration tests).

    use super::*;
    use crate::scalar::Scalar;

    /// The largest relative error of `f` against `reference` on a sweep of `[lo, hi]`,
    /// ignoring results whose magnitude is below `floor` (compared absolutely there).
    fn max_rel_err(f: impl Fn(f32) -> f32, reference: impl Fn(f64) -> f64, lo: f32, hi: f32, floor: f64) -> f64 {
        let n = 200_000;
        (0..=n)
            .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
            .map(|x| {
                let (got, want) = (f(x) as f64, reference(x as f64));
                (got - want).abs() / want.abs().max(floor)
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn exp_is_accurate_and_handles_limits() {
        let s = Scalar;
        let err = max_rel_err(|x| exp(s, x), f64::exp, -87.0, 88.5, 0.0);
        assert!(err < 2.5e-7, "exp rel err {err:e}");
        assert_eq!(exp(s, f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(s, -200.0), 0.0);
        assert_eq!(exp(s, f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(s, 89.0), f32::INFINITY);
        assert!(exp(s, f32::NAN).is_nan());
        // Subnormal results.
        let sub = exp(s, -100.0) as f64;
        assert!((sub - (-100f64).exp()).abs() / (-100f64).exp() < 1e-3, "{sub:e}");
    }

    #[test]
    fn log_is_accurate_and_handles_limits() {
        let s = Scalar;
        let err = max_rel_err(|x| log(s, x), f64::ln, 1e-30, 1e3, 1e-30);
        assert!(err < 2.5e-7, "log rel err {err:e}");
        let err = max_rel_err(|x| log(s, x), f64::ln, 0.5, 2.0, 1e-3);
        assert!(err < 2.5e-7, "log rel err near 1 {err:e}");
        assert_eq!(log(s, 0.0), f32::NEG_INFINITY);
        assert!(log(s, -1.0).is_nan());
        assert!(log(s, f32::NAN).is_nan());
        assert_eq!(log(s, f32::INFINITY), f32::INFINITY);
        let sub = 1e-40f32;
        assert!((log(s, sub) as f64 - (sub as f64).ln()).abs() < 1e-5);
    }

    #[test]
    fn tanh_sigmoid_silu_gelu_are_accurate() {
        let s = Scalar;
        let err = max_rel_err(|x| tanh(s, x), f64::tanh, -12.0, 12.0, 1e-30);
        assert!(err < 4e-7, "tanh {err:e}");
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let err = max_rel_err(|x| sigmoid(s, x), sig, -80.0, 80.0, 1e-30);
        assert!(err < 4e-7, "sigmoid {err:e}");
        let err = max_rel_err(|x| silu(s, x), |x| x * sig(x), -80.0, 80.0, 1e-30);
        assert!(err < 4e-7, "silu {err:e}");
        let gelu = |x: f64| 0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x)).tanh());
        let err = max_rel_err(|x| gelu_tanh(s, x), gelu, -3.0, 10.0, 1e-30);
        assert!(err < 4e-7, "gelu_tanh {err:e}");
        let gelu_erf_ref = |x: f64| 0.5 * x * (1.0 + libm_erf(x / std::f64::consts::SQRT_2));
        let err = max_rel_err(|x| gelu_erf(s, x), gelu_erf_ref, -5.0, 10.0, 1e-30);
        assert!(err < 1.5e-6, "gelu_erf {err:e}");
        assert!(tanh(s, f32::NAN).is_nan());
        assert_eq!(tanh(s, f32::INFINITY), 1.0);
        assert_eq!(tanh(s, f32::NEG_INFINITY), -1.0);
    }

    /// erf in f64 to ~1e-16 (series / continued fraction), for the test only.
    fn libm_erf(x: f64) -> f64 {
        // A high-order series for |x| < 3, erfc continued fraction beyond.
        let a = x.abs();
        let r = if a < 3.0 {
            let mut sum = a;
            let mut term = a;
            let mut k = 0.0;
            loop {
                k += 1.0;
                term *= -a * a / k;
                let add = term / (2.0 * k + 1.0);
                sum += add;
                if add.abs() < 1e-17 * sum.abs() {
                    break;
                }
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // Lentz continued fraction for erfc.
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (a + f);
            }
            1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + f)
        };
        r.copysign(x)
    }
}
