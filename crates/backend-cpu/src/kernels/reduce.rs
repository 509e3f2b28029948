//! Row reductions: sum, max, min (NaN-propagating), sum of squares, argmax.

use tempra_tensor::ReduceOp;

use crate::simd::{Simd, simd_dispatch};

/// Independent accumulators per reduction (hides the add latency).
const ACC: usize = 4;

/// Folds a contiguous row into one vector with `$combine(acc, v)`, every lane starting at
/// `$init` (a partial tail is padded with `$init`, which must be neutral), then merges the
/// accumulators with `$merge(a, b)`.
macro_rules! fold_row {
    ($s:ident, $x:expr, $init:expr, |$acc:ident, $v:ident| $combine:expr, |$a:ident, $b:ident| $merge:expr) => {{
        let x: &[f32] = $x;
        let init = $s.splat($init);
        let mut accs = [init; ACC];
        let mut blocks = x.chunks_exact(S::LANES * ACC);
        for block in &mut blocks {
            for (k, acc) in accs.iter_mut().enumerate() {
                let $acc = *acc;
                let $v = $s.load(&block[k * S::LANES..]);
                *acc = $combine;
            }
        }
        let mut chunks = blocks.remainder().chunks_exact(S::LANES);
        for chunk in &mut chunks {
            let $acc = accs[0];
            let $v = $s.load(chunk);
            accs[0] = $combine;
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let $acc = accs[1];
            let $v = $s.load_partial(tail, $init);
            accs[1] = $combine;
        }
        let ($a, $b) = (accs[0], accs[1]);
        let left = $merge;
        let ($a, $b) = (accs[2], accs[3]);
        let right = $merge;
        let ($a, $b) = (left, right);
        $merge
    }};
}

/// Values summed in f32 lanes before the partial sum joins an f64 total: keeps long sums
/// (a vocabulary row) within a few f32 ulps of the exact result at no measurable cost.
const SUM_CHUNK: usize = 512;

/// Σ x, as f64 (f32 lanes per chunk).
#[inline(always)]
pub(crate) fn sum_row_f64<S: Simd>(s: S, x: &[f32]) -> f64 {
    let mut total = 0f64;
    for chunk in x.chunks(SUM_CHUNK) {
        total += s.reduce_add(fold_row!(s, chunk, 0.0, |acc, v| s.add(acc, v), |a, b| s.add(a, b)))
            as f64;
    }
    total
}

/// Σ (x - c), as f64.
#[inline(always)]
pub(crate) fn sum_dev_row_f64<S: Simd>(s: S, x: &[f32], c: f32) -> f64 {
    let vc = s.splat(c);
    let mut total = 0f64;
    for chunk in x.chunks(SUM_CHUNK) {
        let n = chunk.len() - chunk.len() % S::LANES;
        let body = fold_row!(
            s,
            &chunk[..n],
            0.0,
            |acc, v| s.add(acc, s.sub(v, vc)),
            |a, b| s.add(a, b)
        );
        total += s.reduce_add(body) as f64;
        total += chunk[n..].iter().map(|v| (v - c) as f64).sum::<f64>();
    }
    total
}

/// Σ x.
#[inline(always)]
pub(crate) fn sum_row<S: Simd>(s: S, x: &[f32]) -> f32 {
    sum_row_f64(s, x) as f32
}

/// Σ x².
#[inline(always)]
pub(crate) fn sum_sq_row<S: Simd>(s: S, x: &[f32]) -> f32 {
    let mut total = 0f64;
    for chunk in x.chunks(SUM_CHUNK) {
        total += s.reduce_add(fold_row!(
            s,
            chunk,
            0.0,
            |acc, v| s.mul_add(v, v, acc),
            |a, b| s.add(a, b)
        )) as f64;
    }
    total as f32
}

/// Σ (x - c)².
#[inline(always)]
pub(crate) fn sum_sq_dev_row<S: Simd>(s: S, x: &[f32], c: f32) -> f32 {
    let vc = s.splat(c);
    let mut total = 0f64;
    for chunk in x.chunks(SUM_CHUNK) {
        // Whole vectors in SIMD, the tail (< LANES values) in scalar code.
        let n = chunk.len() - chunk.len() % S::LANES;
        let body = fold_row!(
            s,
            &chunk[..n],
            0.0,
            |acc, v| s.mul_add(s.sub(v, vc), s.sub(v, vc), acc),
            |a, b| s.add(a, b)
        );
        total += s.reduce_add(body) as f64;
        total += chunk[n..]
            .iter()
            .map(|v| ((v - c) * (v - c)) as f64)
            .sum::<f64>();
    }
    total as f32
}

/// max x, NaN when any element is NaN (an empty row gives -∞).
#[inline(always)]
pub(crate) fn max_row<S: Simd>(s: S, x: &[f32]) -> f32 {
    let m = fold_row!(
        s,
        x,
        f32::NEG_INFINITY,
        |acc, v| s.max_nan(acc, v),
        |a, b| s.max_nan(a, b)
    );
    // `max_nan` keeps a NaN in its lane; the lane reduction might not, so check first.
    if s.first_set(s.unord(m, m)).is_some() {
        f32::NAN
    } else {
        s.reduce_max(m)
    }
}

/// min x, NaN when any element is NaN (an empty row gives +∞).
#[inline(always)]
pub(crate) fn min_row<S: Simd>(s: S, x: &[f32]) -> f32 {
    let m = fold_row!(s, x, f32::INFINITY, |acc, v| s.min_nan(acc, v), |a, b| s
        .min_nan(a, b));
    if s.first_set(s.unord(m, m)).is_some() {
        f32::NAN
    } else {
        s.reduce_min(m)
    }
}

/// The reduction of `op` over a contiguous row (`Mean` divides by the length).
#[inline(always)]
pub(crate) fn reduce_row<S: Simd>(s: S, op: ReduceOp, x: &[f32]) -> f32 {
    match op {
        ReduceOp::Sum => sum_row(s, x),
        ReduceOp::Mean => sum_row(s, x) / x.len() as f32,
        ReduceOp::Max => max_row(s, x),
        ReduceOp::Min => min_row(s, x),
    }
}

/// The index of the first maximum of a non-empty row; a NaN counts as the maximum (the
/// first NaN wins), as in the reference.
#[inline(always)]
pub(crate) fn argmax_row<S: Simd>(s: S, x: &[f32]) -> usize {
    // Pass 1: the maximum, ignoring NaN (x86 `max` returns the accumulator's lane when
    // the new one is NaN), and whether any NaN was seen.
    let mut acc = s.splat(f32::NEG_INFINITY);
    let mut nan = s.splat(0.0);
    let mut chunks = x.chunks_exact(S::LANES);
    for chunk in &mut chunks {
        let v = s.load(chunk);
        acc = s.max(v, acc);
        nan = s.add(nan, s.sub(v, v)); // NaN stays NaN; finite and ±∞ add 0 or NaN
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let v = s.load_partial(tail, f32::NEG_INFINITY);
        acc = s.max(v, acc);
        let w = s.load_partial(tail, 0.0);
        nan = s.add(nan, s.sub(w, w));
    }
    if s.reduce_add(nan) != 0.0 {
        // A NaN or ±∞ - ±∞ showed up: find the first NaN exactly (rare).
        if let Some(i) = x.iter().position(|v| v.is_nan()) {
            return i;
        }
    }
    let best = s.reduce_max(acc);
    // Pass 2: the first index holding it.
    let target = s.splat(best);
    let mut chunks = x.chunks_exact(S::LANES);
    let mut base = 0;
    for chunk in &mut chunks {
        if let Some(i) = s.first_set(s.eq(s.load(chunk), target)) {
            return base + i;
        }
        base += S::LANES;
    }
    chunks
        .remainder()
        .iter()
        .position(|&v| v == best)
        .map_or(0, |i| base + i)
}

simd_dispatch! {
    /// `op` over a contiguous row.
    pub(crate) fn reduce(op: ReduceOp, x: &[f32]) -> f32 = reduce_row;
    /// The first index of the maximum of a non-empty contiguous row.
    pub(crate) fn argmax(x: &[f32]) -> usize = argmax_row;
}
