//! Softmax and log-softmax of one contiguous row.

use crate::kernels::reduce::max_row;
use crate::math;
use crate::simd::{Simd, simd_dispatch};

/// Values whose exponentials are summed in f32 lanes before joining an f64 total.
const CHUNK: usize = 512;

/// `y = softmax(x)` (or `log_softmax` when `log`) over one non-empty row.
#[inline(always)]
fn softmax_row<S: Simd>(s: S, x: &[f32], log: bool, y: &mut [f32]) {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &mut y[..n]);
    let max = max_row(s, x);
    let vmax = s.splat(max);
    // Σ exp(x - max): f32 lanes per chunk, chunks joined in f64 (long vocabulary rows).
    let mut total = 0f64;
    for (xs, ys) in x.chunks(CHUNK).zip(y.chunks_mut(CHUNK)) {
        let mut acc = s.splat(0.0);
        let mut xc = xs.chunks_exact(S::LANES);
        let mut yc = ys.chunks_exact_mut(S::LANES);
        if log {
            for xv in &mut xc {
                acc = s.add(acc, math::exp(s, s.sub(s.load(xv), vmax)));
            }
        } else {
            for (xv, yv) in (&mut xc).zip(&mut yc) {
                let e = math::exp(s, s.sub(s.load(xv), vmax));
                s.store(yv, e);
                acc = s.add(acc, e);
            }
        }
        let (xr, yr) = (xc.remainder(), yc.into_remainder());
        if !xr.is_empty() {
            // Padding lanes hold -∞, whose exp is 0.
            let e = math::exp(s, s.sub(s.load_partial(xr, f32::NEG_INFINITY), vmax));
            if !log {
                s.store_partial(yr, e);
            }
            acc = s.add(acc, e);
        }
        total += s.reduce_add(acc) as f64;
    }
    let sum = total as f32;
    if log {
        let vlog = s.splat(total.ln() as f32);
        let mut xc = x.chunks_exact(S::LANES);
        let mut yc = y.chunks_exact_mut(S::LANES);
        for (xv, yv) in (&mut xc).zip(&mut yc) {
            s.store(yv, s.sub(s.sub(s.load(xv), vmax), vlog));
        }
        let lsum = total.ln() as f32;
        for (xv, yv) in xc.remainder().iter().zip(yc.into_remainder()) {
            *yv = (xv - max) - lsum;
        }
    } else {
        let inv = s.splat(1.0 / sum);
        let mut yc = y.chunks_exact_mut(S::LANES);
        for yv in &mut yc {
            let r = s.mul(s.load(yv), inv);
            s.store(yv, r);
        }
        let inv = 1.0 / sum;
        for yv in yc.into_remainder() {
            *yv *= inv;
        }
    }
}

simd_dispatch! {
    /// Softmax (log-softmax when `log`) of one non-empty contiguous row.
    pub(crate) fn softmax(x: &[f32], log: bool, y: &mut [f32]) -> () = softmax_row;
}
