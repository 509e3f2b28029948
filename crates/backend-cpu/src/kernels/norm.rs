//! RMS norm and layer norm of one contiguous row, with f32 parameters.

use crate::kernels::reduce::{sum_dev_row_f64, sum_row_f64, sum_sq_dev_row, sum_sq_row};
use crate::simd::{Simd, simd_dispatch};

/// `y = x · scale · w`.
#[inline(always)]
fn scale_mul_row<S: Simd>(s: S, x: &[f32], scale: f32, w: &[f32], y: &mut [f32]) {
    let n = x.len().min(w.len()).min(y.len());
    let (x, w, y) = (&x[..n], &w[..n], &mut y[..n]);
    let vs = s.splat(scale);
    let mut xc = x.chunks_exact(S::LANES);
    let mut wc = w.chunks_exact(S::LANES);
    let mut yc = y.chunks_exact_mut(S::LANES);
    for ((xv, wv), yv) in (&mut xc).zip(&mut wc).zip(&mut yc) {
        s.store(yv, s.mul(s.mul(s.load(xv), vs), s.load(wv)));
    }
    for ((xv, wv), yv) in xc
        .remainder()
        .iter()
        .zip(wc.remainder())
        .zip(yc.into_remainder())
    {
        *yv = xv * scale * wv;
    }
}

/// One row of RMS norm: `y = x / √(mean(x²) + eps) · w`.
#[inline(always)]
fn rms_norm_row<S: Simd>(s: S, x: &[f32], w: &[f32], eps: f64, y: &mut [f32]) {
    let ms = sum_sq_row(s, x) as f64 / x.len() as f64;
    let scale = (1.0 / (ms + eps).sqrt()) as f32;
    scale_mul_row(s, x, scale, w, y);
}

/// One row of layer norm: `y = (x - mean) / √(var + eps) · w (+ b)`.
#[inline(always)]
fn layer_norm_row<S: Simd>(s: S, x: &[f32], w: &[f32], b: Option<&[f32]>, eps: f64, y: &mut [f32]) {
    let n = x.len().min(w.len()).min(y.len());
    let (x, w, y) = (&x[..n], &w[..n], &mut y[..n]);
    // The mean in two passes (a first estimate, then the mean deviation from it, both
    // small-valued sums), kept as an f32 pair `hi + lo`: `x - hi` is exact for x near the
    // mean, so rows with a large offset keep their relative accuracy.
    let estimate = (sum_row_f64(s, x) / n as f64) as f32;
    let mean = estimate as f64 + sum_dev_row_f64(s, x, estimate) / n as f64;
    let hi = mean as f32;
    let lo = (mean - hi as f64) as f32;
    let var = sum_sq_dev_row(s, x, hi) as f64 / n as f64 - (lo as f64) * (lo as f64);
    let scale = (1.0 / (var.max(0.0) + eps).sqrt()) as f32;
    let (vh, vl, vs) = (s.splat(hi), s.splat(lo), s.splat(scale));
    let mut xc = x.chunks_exact(S::LANES);
    let mut wc = w.chunks_exact(S::LANES);
    let mut yc = y.chunks_exact_mut(S::LANES);
    for ((xv, wv), yv) in (&mut xc).zip(&mut wc).zip(&mut yc) {
        let centered = s.sub(s.sub(s.load(xv), vh), vl);
        s.store(yv, s.mul(s.mul(centered, vs), s.load(wv)));
    }
    for ((xv, wv), yv) in xc
        .remainder()
        .iter()
        .zip(wc.remainder())
        .zip(yc.into_remainder())
    {
        *yv = ((xv - hi) - lo) * scale * wv;
    }
    if let Some(b) = b {
        let b = &b[..n];
        let mut bc = b.chunks_exact(S::LANES);
        let mut yc = y.chunks_exact_mut(S::LANES);
        for (bv, yv) in (&mut bc).zip(&mut yc) {
            let r = s.add(s.load(yv), s.load(bv));
            s.store(yv, r);
        }
        for (bv, yv) in bc.remainder().iter().zip(yc.into_remainder()) {
            *yv += bv;
        }
    }
}

simd_dispatch! {
    /// One row of RMS norm.
    pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f64, y: &mut [f32]) -> () = rms_norm_row;
    /// One row of layer norm.
    pub(crate) fn layer_norm(x: &[f32], w: &[f32], b: Option<&[f32]>, eps: f64, y: &mut [f32]) -> () = layer_norm_row;
}
