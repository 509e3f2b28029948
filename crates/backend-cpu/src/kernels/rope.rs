//! Rotary embedding of one head row, in place, from precomputed cos/sin tables.

use crate::math;
use crate::simd::{Simd, simd_dispatch};

/// Rotates the first `cos.len()` values of `y` in interleaved pairs `(2i, 2i+1)`.
///
/// The tables are per element: `cos[2i] = cos[2i+1] = cos θᵢ`, `sin[2i] = -sin θᵢ`,
/// `sin[2i+1] = sin θᵢ`, so `y[j] ← y[j]·cos[j] + y[j^1]·sin[j]`.
#[inline(always)]
fn rope_interleaved_row<S: Simd>(s: S, y: &mut [f32], cos: &[f32], sin: &[f32]) {
    let rd = cos.len().min(sin.len()).min(y.len()) & !1;
    let mut done = 0;
    if S::LANES > 1 {
        let mut yc = y[..rd].chunks_exact_mut(S::LANES);
        for ((yv, cv), sv) in (&mut yc)
            .zip(cos.chunks_exact(S::LANES))
            .zip(sin.chunks_exact(S::LANES))
        {
            let v = s.load(yv);
            let r = s.mul_add(v, s.load(cv), s.mul(s.swap_pairs(v), s.load(sv)));
            s.store(yv, r);
            done += S::LANES;
        }
    }
    for j in (done..rd).step_by(2) {
        let (a, b) = (y[j], y[j + 1]);
        y[j] = a * cos[j] + b * sin[j];
        y[j + 1] = b * cos[j + 1] + a * sin[j + 1];
    }
}

/// Rotates pairs `(i, i + half)` of `y` for `i < half = cos.len()`, with per-pair tables.
#[inline(always)]
fn rope_neox_row<S: Simd>(s: S, y: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = cos.len().min(sin.len()).min(y.len() / 2);
    let (lo, hi) = y.split_at_mut(half);
    let hi = &mut hi[..half];
    let mut lc = lo.chunks_exact_mut(S::LANES);
    let mut hc = hi.chunks_exact_mut(S::LANES);
    let mut cc = cos[..half].chunks_exact(S::LANES);
    let mut sc = sin[..half].chunks_exact(S::LANES);
    for (((lv, hv), cv), sv) in (&mut lc).zip(&mut hc).zip(&mut cc).zip(&mut sc) {
        let (a, b) = (s.load(lv), s.load(hv));
        let (c, sn) = (s.load(cv), s.load(sv));
        s.store(lv, s.sub(s.mul(a, c), s.mul(b, sn)));
        s.store(hv, s.mul_add(a, sn, s.mul(b, c)));
    }
    let tails = lc
        .into_remainder()
        .iter_mut()
        .zip(hc.into_remainder())
        .zip(cc.remainder())
        .zip(sc.remainder());
    for (((l, h), c), sn) in tails {
        let (a, b) = (*l, *h);
        *l = a * c - b * sn;
        *h = a * sn + b * c;
    }
}

/// `sin[i], cos[i] = sin angles[i], cos angles[i]` for angles in `[-π, π]`.
#[inline(always)]
fn sin_cos_row<S: Simd>(s: S, angles: &[f32], sin: &mut [f32], cos: &mut [f32]) {
    let n = angles.len().min(sin.len()).min(cos.len());
    let mut i = 0;
    while i + S::LANES <= n {
        let (sv, cv) = math::sin_cos(s, s.load(&angles[i..]));
        s.store(&mut sin[i..], sv);
        s.store(&mut cos[i..], cv);
        i += S::LANES;
    }
    if i < n {
        let (sv, cv) = math::sin_cos(s, s.load_partial(&angles[i..n], 0.0));
        s.store_partial(&mut sin[i..n], sv);
        s.store_partial(&mut cos[i..n], cv);
    }
}

simd_dispatch! {
    /// `sin`, `cos` of angles in `[-π, π]` (the rope tables).
    pub(crate) fn sin_cos(angles: &[f32], sin: &mut [f32], cos: &mut [f32]) -> () = sin_cos_row;
    /// Interleaved rope of one row in place (per-element tables, see the kernel).
    pub(crate) fn rope_interleaved(y: &mut [f32], cos: &[f32], sin: &[f32]) -> () = rope_interleaved_row;
    /// NeoX rope of one row in place (per-pair tables).
    pub(crate) fn rope_neox(y: &mut [f32], cos: &[f32], sin: &[f32]) -> () = rope_neox_row;
}
