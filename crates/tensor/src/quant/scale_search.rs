//! Scale fitting shared by the K-quant formats: ggml's `nearest_int`, `make_qx_quants`,
//! `make_q3_quants` and `make_qkx2_quants`, as used by the reference quantizers (no
//! importance matrix).
//!
//! Every float operation keeps ggml's order of evaluation (`w*x*l` is `(w*x)*l`, sums run
//! from the first element), so the chosen levels and scales match ggml's bit for bit.

/// Sub-blocks whose largest magnitude is below this are treated as all zero
/// (ggml's `GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// Rounds to the nearest integer, ties to even, exactly as ggml's `nearest_int`: adds
/// 1.5 * 2^23 and reads the low mantissa bits.
///
/// Exact for `|x| <= 4194303`; ggml asserts that range, beyond it (and for NaN) this
/// returns the same meaningless integer as ggml's release builds, never panicking.
pub(crate) fn nearest_int(x: f32) -> i32 {
    let shifted = x + 12_582_912.0;
    (shifted.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The value of largest magnitude (first one on ties) and that magnitude.
fn signed_abs_max(x: &[f32]) -> (f32, f32) {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// ggml's `make_qx_quants` with `rmse_type == 1` and no importance weights (Q6_K): fits a
/// symmetric scale for levels in `-nmax..nmax` by weighted least squares (weights
/// `x*x`), trying 18 perturbed inverse scales. Writes `level + nmax` to `levels` and
/// returns the scale.
pub(crate) fn make_qx_quants<const N: usize>(x: &[f32; N], nmax: i32, levels: &mut [u8; N]) -> f32 {
    let (max, amax) = signed_abs_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let nmax_f = nmax as f32;
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);

    let iscale = -nmax_f / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (&v, out) in x.iter().zip(levels.iter_mut()) {
        let l = level(iscale, v);
        *out = (l + nmax) as u8;
        let (w, lf) = (v * v, l as f32);
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for step in -9..=9 {
        if step == 0 {
            continue;
        }
        let iscale = -(nmax_f + 0.1 * step as f32) / max;
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let (w, lf) = (v * v, level(iscale, v) as f32);
            sumlx += w * v * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (&v, out) in x.iter().zip(levels.iter_mut()) {
                *out = (level(iscale, v) + nmax) as u8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse` (Q3_K): a symmetric scale for levels in
/// `-nmax..nmax`, refined by up to five rounds of coordinate descent on the weighted
/// (`x*x`) least-squares error. Writes `level + nmax` to `levels` and returns the scale.
pub(crate) fn make_q3_quants<const N: usize>(x: &[f32; N], nmax: i32, levels: &mut [u8; N]) -> f32 {
    let (max, amax) = signed_abs_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut signed = [0i32; N];
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (&v, out) in x.iter().zip(signed.iter_mut()) {
        let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *out = l;
        let (w, lf) = (v * v, l as f32);
        sumlx += w * v * lf;
        suml2 += w * lf * lf;
    }
    for _ in 0..5 {
        let mut changed = false;
        for (&v, l) in x.iter().zip(signed.iter_mut()) {
            let (w, lf) = (v * v, *l as f32);
            let mut slx = sumlx - w * v * lf;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * lf * lf;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *l {
                    let new_lf = new_l as f32;
                    slx += w * v * new_lf;
                    sl2 += w * new_lf * new_lf;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *l = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (out, &l) in levels.iter_mut().zip(&signed) {
        *out = (l + nmax) as u8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// The search parameters of ggml's `make_qkx2_quants`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScaleMinSearch {
    /// Largest level (levels run `0..=nmax`).
    pub(crate) nmax: i32,
    /// Offset of the first trial inverse scale, in levels.
    pub(crate) rmin: f32,
    /// Step between trial inverse scales, in levels.
    pub(crate) rdelta: f32,
    /// Number of steps (`nstep + 1` trials).
    pub(crate) nstep: i32,
    /// Minimise the weighted absolute error instead of the squared error.
    pub(crate) use_mad: bool,
}

/// ggml's `make_qkx2_quants` (Q2_K, Q4_K, Q5_K): fits an affine map `x ~ scale*l - min`
/// with levels `l` in `0..=nmax` and `min >= 0`, by weighted least squares over a range
/// of trial inverse scales. Writes the levels and returns `(scale, min)` (ggml's
/// `*the_min`, already negated so it is subtracted).
pub(crate) fn make_qkx2_quants<const N: usize>(
    x: &[f32; N],
    weights: &[f32; N],
    search: ScaleMinSearch,
    levels: &mut [u8; N],
) -> (f32, f32) {
    let ScaleMinSearch {
        nmax,
        rmin,
        rdelta,
        nstep,
        use_mad,
    } = search;
    let nmax_f = nmax as f32;
    let error_of = |diff: f32| if use_mad { diff.abs() } else { diff * diff };

    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..N {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }

    let iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..N {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        levels[i] = l as u8;
        best_error += weights[i] * error_of(scale * l as f32 + min - x[i]);
    }
    if nstep < 1 {
        return (scale, -min);
    }

    let mut trial = [0u8; N];
    for step in 0..=nstep {
        let iscale = (rmin + rdelta * step as f32 + nmax_f) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..N {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            trial[i] = l as u8;
            let (w, lf) = (weights[i], l as f32);
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..N {
                cur_error += weights[i] * error_of(this_scale * trial[i] as f32 + this_min - x[i]);
            }
            if cur_error < best_error {
                *levels = trial;
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-2.4999), -2);
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
        assert_eq!(nearest_int(-4_194_303.0), -4_194_303);
        // Outside ggml's range: no panic.
        let _ = nearest_int(f32::NAN);
        let _ = nearest_int(f32::MAX);
    }

    #[test]
    fn all_zero_sub_blocks_get_zero_scale() {
        let x = [0.0f32; 16];
        let mut levels = [9u8; 16];
        assert_eq!(make_qx_quants(&x, 32, &mut levels), 0.0);
        assert_eq!(levels, [0; 16]);
        levels = [9; 16];
        assert_eq!(make_q3_quants(&x, 4, &mut levels), 0.0);
        assert_eq!(levels, [0; 16]);
        let search = ScaleMinSearch {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        levels = [9; 16];
        let (scale, min) = make_qkx2_quants(&x, &[0.0; 16], search, &mut levels);
        assert_eq!((scale, min), (0.0, 0.0));
        assert_eq!(levels, [0; 16]);
    }

    #[test]
    fn symmetric_fit_reproduces_exact_grid() {
        // Values on a grid of step 0.5 (levels -32..28) are reproduced exactly.
        let x: [f32; 16] = std::array::from_fn(|i| (i as f32 - 8.0) * 2.0);
        let mut levels = [0u8; 16];
        let scale = make_qx_quants(&x, 32, &mut levels);
        for (v, l) in x.iter().zip(levels) {
            assert!((scale * (l as f32 - 32.0) - v).abs() < 1e-5, "{v} vs {l}");
        }
    }
}
