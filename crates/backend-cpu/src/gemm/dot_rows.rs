//! `linear` over float weights (F32, F16, BF16) in dot form, with one arithmetic at
//! every row count: `out[i][j] = x[i] · w[j]`, each output one dot product of an input
//! row and a weight row, both contiguous along the depth.
//!
//! Each output accumulates `x[i][e] · w[j][e]` into one vector of the ISA
//! (`LANES` partial sums, element `e` in lane `e % LANES`; the portable build keeps
//! eight one-lane sums, element `e` in sum `e % 8`) over the whole depth in order,
//! sums the lanes with the ISA's fixed `reduce_add`, then adds the tail products
//! past the last whole vector one by one. Nothing in that sequence depends on how many
//! input rows the call has, which tile an output falls in or how the rows were split
//! over threads, so a token's row is bit-identical decoded alone, in a prompt of 512,
//! or beside other sessions (the row-invariance rule of `tests/row_invariance.rs`).
//!
//! The register tile is up to [`R_MAX`] input rows × [`C_MAX`] weight rows: one
//! input row (decode) streams four weight rows at a time from memory, converting
//! halves on the fly and prefetching each row a page ahead; several input rows
//! (prefill) take up to 4 × 3 tiles over weight rows converted to f32 once per block of
//! input rows (exact, so the arithmetic is the same), with a block of input rows
//! sized to stay in L2 while the weight rows stream through L1.

use std::ops::Range;

use half::{bf16, f16};

use super::OutPtr;
use super::operand::Values;
use crate::isa::Level;
use crate::kernels::convert;
use crate::simd::{Lane, Simd, simd_dispatch};

/// Input rows per register tile at most.
pub(crate) const R_MAX: usize = 4;
/// Weight rows per register tile at most.
pub(crate) const C_MAX: usize = 4;

/// Weight rows per tile with one input row (four streams from memory).
const C_DECODE: usize = 4;

/// Weight rows per tile with several input rows: 4 × 3 accumulators, 3 weight vectors
/// and one input vector fill the 16 registers of AVX2; on AVX-512 4 × 4 (wider tiles
/// hold more weight rows than L1 beside the input rows, and ran slower).
fn c_prefill(level: Level) -> usize {
    if level.isa() == crate::isa::Isa::Avx512 {
        4
    } else {
        3
    }
}

/// Bytes of input rows one block holds (they stay in L2 while every weight row of the
/// task streams past them).
const X_BLOCK_BYTES: usize = 256 * 1024;

/// How far ahead of the values being multiplied each weight row is prefetched, one hint
/// per 64-byte line consumed: a page, so the stream never waits at a page boundary.
const PREFETCH_BYTES: usize = 4096;

/// The outputs of one register tile: `[input row][weight row]`.
pub(crate) type TileOut = [[f32; C_MAX]; R_MAX];

/// Input rows with the same depth, one after the other.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InputRows<'a> {
    /// Row `i` is `x[i * k .. (i + 1) * k]`.
    pub(crate) x: &'a [f32],
    /// Values per row.
    pub(crate) k: usize,
}

/// Float weight rows `w [N, K]`, contiguous along `K`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WeightRows<'a> {
    /// The storage (F32, F16 or BF16 values; block formats never come here).
    pub(crate) values: Values<'a>,
    /// Element where row 0 starts.
    pub(crate) offset: usize,
    /// Elements from one row's start to the next.
    pub(crate) row_stride: usize,
}

simd_dispatch! {
    /// `x[rows] · w[cols]` for `rows.len() ≤ R_MAX` input rows (of `x`) and
    /// `cols.len() ≤ C_MAX` weight rows (of `w`) of depth `x.k`; panics on a range out
    /// of its operand or a wider tile.
    pub(crate) fn dot_tile<'a>(
        x: InputRows<'a>,
        rows: Range<usize>,
        w: WeightRows<'a>,
        cols: Range<usize>,
    ) -> TileOut = tile_checked;
}

/// [`dot_tile`]'s kernel: checks the ranges, then runs the tile of their shape.
#[inline(always)]
fn tile_checked<S: Simd>(
    s: S,
    x: InputRows<'_>,
    rows: Range<usize>,
    w: WeightRows<'_>,
    cols: Range<usize>,
) -> TileOut {
    let k = x.k;
    let (r, c) = (rows.len(), cols.len());
    assert!(
        (1..=R_MAX).contains(&r) && (1..=C_MAX).contains(&c),
        "dot tile of {r} × {c}"
    );
    assert!(rows.end * k <= x.x.len(), "input rows past the input");
    let start = w.offset + cols.start * w.row_stride;
    let last = w.offset + (cols.end - 1) * w.row_stride + k;
    let xp = x.x[rows.start * k..].as_ptr();
    // Rows `rows` of `x` hold `k` values each (asserted above); the `c` weight rows from
    // element `start`, `row_stride` apart, hold `k` values each once `last` is checked
    // against the storage's length in the arm.
    match w.values {
        Values::F32(v) => {
            assert!(last <= v.len(), "weight rows past their storage");
            // SAFETY: the rows are readable (above).
            unsafe { tile_any::<S, f32>(s, xp, k, r, v[start..].as_ptr(), w.row_stride, c) }
        }
        Values::F16(v) => {
            assert!(last <= v.len(), "weight rows past their storage");
            // SAFETY: the rows are readable (above).
            unsafe { tile_any::<S, f16>(s, xp, k, r, v[start..].as_ptr(), w.row_stride, c) }
        }
        Values::BF16(v) => {
            assert!(last <= v.len(), "weight rows past their storage");
            // SAFETY: the rows are readable (above).
            unsafe { tile_any::<S, bf16>(s, xp, k, r, v[start..].as_ptr(), w.row_stride, c) }
        }
        Values::Blocks { .. } => panic!("dot tile over block-quantized weights"),
    }
}

/// The tile of shape `r × c` (each in `1..=R_MAX`, `1..=C_MAX`): eight one-lane sums per
/// output on the portable build (one input row per tile, the registers hold no more),
/// one vector elsewhere.
///
/// # Safety
///
/// `r` rows of `k` f32s from `x`, `k` apart, and `c` rows of `k` values from `w`,
/// `w_stride` apart, are readable.
#[inline(always)]
unsafe fn tile_any<S: Simd, L: Lane>(
    s: S,
    x: *const f32,
    k: usize,
    r: usize,
    w: *const L,
    w_stride: usize,
    c: usize,
) -> TileOut {
    // SAFETY: forwarded contract; every arm's shape is `r × c`, or one row of it at a
    // time.
    unsafe {
        if S::LANES == 1 {
            let mut out = [[0f32; C_MAX]; R_MAX];
            for (i, o) in out.iter_mut().enumerate().take(r) {
                let xi = x.add(i * k);
                *o = match c {
                    1 => tile::<S, L, 1, 1, 8>(s, xi, k, w, w_stride),
                    2 => tile::<S, L, 1, 2, 8>(s, xi, k, w, w_stride),
                    3 => tile::<S, L, 1, 3, 8>(s, xi, k, w, w_stride),
                    _ => tile::<S, L, 1, 4, 8>(s, xi, k, w, w_stride),
                }[0];
            }
            return out;
        }
        match (r, c) {
            (1, 1) => tile::<S, L, 1, 1, 1>(s, x, k, w, w_stride),
            (1, 2) => tile::<S, L, 1, 2, 1>(s, x, k, w, w_stride),
            (1, 3) => tile::<S, L, 1, 3, 1>(s, x, k, w, w_stride),
            (1, 4) => tile::<S, L, 1, 4, 1>(s, x, k, w, w_stride),
            (2, 1) => tile::<S, L, 2, 1, 1>(s, x, k, w, w_stride),
            (2, 2) => tile::<S, L, 2, 2, 1>(s, x, k, w, w_stride),
            (2, 3) => tile::<S, L, 2, 3, 1>(s, x, k, w, w_stride),
            (2, 4) => tile::<S, L, 2, 4, 1>(s, x, k, w, w_stride),
            (3, 1) => tile::<S, L, 3, 1, 1>(s, x, k, w, w_stride),
            (3, 2) => tile::<S, L, 3, 2, 1>(s, x, k, w, w_stride),
            (3, 3) => tile::<S, L, 3, 3, 1>(s, x, k, w, w_stride),
            (3, 4) => tile::<S, L, 3, 4, 1>(s, x, k, w, w_stride),
            (_, 1) => tile::<S, L, 4, 1, 1>(s, x, k, w, w_stride),
            (_, 2) => tile::<S, L, 4, 2, 1>(s, x, k, w, w_stride),
            (_, 3) => tile::<S, L, 4, 3, 1>(s, x, k, w, w_stride),
            _ => tile::<S, L, 4, 4, 1>(s, x, k, w, w_stride),
        }
    }
}

/// One `R × C` register tile of depth `k`, `P` accumulators per output (elements
/// `e` go to accumulator `(e / LANES) % P`, lane `e % LANES`).
///
/// # Safety
///
/// `R` rows of `k` f32s from `x`, `k` apart, and `C` rows of `k` values from `w`,
/// `w_stride` apart, are readable.
#[inline(always)]
unsafe fn tile<S: Simd, L: Lane, const R: usize, const C: usize, const P: usize>(
    s: S,
    x: *const f32,
    k: usize,
    w: *const L,
    w_stride: usize,
) -> TileOut {
    let chunk = S::LANES * P;
    let whole = k / chunk * chunk;
    // Chunks per 64-byte line of a weight row (one prefetch hint per line).
    let per_line = (64 / (chunk * size_of::<L>())).max(1);
    let line = chunk * per_line;
    let ahead = PREFETCH_BYTES / size_of::<L>();
    let mut acc = [[[s.splat(0.0); P]; C]; R];
    let mut e = 0;
    // SAFETY: every step reads below `whole ≤ k` in its rows (`e + chunk ≤ whole`);
    // prefetches never fault.
    unsafe {
        while e + line <= whole {
            for j in 0..C {
                prefetch_hint(w.wrapping_add(j * w_stride + e + ahead).cast());
            }
            for u in 0..per_line {
                step::<S, L, R, C, P>(s, x, k, w, w_stride, e + u * chunk, &mut acc);
            }
            e += line;
        }
        while e < whole {
            step::<S, L, R, C, P>(s, x, k, w, w_stride, e, &mut acc);
            e += chunk;
        }
    }
    let mut out = [[0f32; C_MAX]; R_MAX];
    for (i, (row, o)) in acc.iter().zip(&mut out).enumerate() {
        for (j, (parts, oj)) in row.iter().zip(o.iter_mut()).enumerate() {
            let mut v = parts[0];
            for &part in &parts[1..] {
                v = s.add(v, part);
            }
            let mut sum = s.reduce_add(v);
            for t in whole..k {
                // SAFETY: `t < k` in row `i` of `x` and row `j` of `w`.
                let (xt, wt) = unsafe { (*x.add(i * k + t), (*w.add(j * w_stride + t)).to_f32()) };
                sum += xt * wt;
            }
            *oj = sum;
        }
    }
    out
}

/// One step of [`tile`]: `P` vectors of each row from element `e` on, multiplied into
/// the accumulators.
///
/// # Safety
///
/// As [`tile`], and `e + LANES · P ≤ k`.
#[inline(always)]
unsafe fn step<S: Simd, L: Lane, const R: usize, const C: usize, const P: usize>(
    s: S,
    x: *const f32,
    k: usize,
    w: *const L,
    w_stride: usize,
    e: usize,
    acc: &mut [[[S::V; P]; C]; R],
) {
    for p in 0..P {
        let at = e + p * S::LANES;
        let mut wv = [s.splat(0.0); C];
        for (j, v) in wv.iter_mut().enumerate() {
            // SAFETY: `at + LANES ≤ k` in weight row `j` (the caller's contract).
            *v = unsafe { L::load_ptr(s, w.add(j * w_stride + at)) };
        }
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: `at + LANES ≤ k` in input row `i`.
            let xv = unsafe { s.load_ptr(x.add(i * k + at)) };
            for (a, &wj) in row.iter_mut().zip(&wv) {
                a[p] = s.mul_add(xv, wj, a[p]);
            }
        }
    }
}

/// A prefetch hint for the line at `p` (nothing off x86).
#[inline(always)]
fn prefetch_hint(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// f32s of scratch [`linear_rows`] needs for `m` input rows of depth `k`.
pub(crate) fn scratch_floats(m: usize, k: usize) -> usize {
    if m >= R_MAX { C_MAX * k } else { 0 }
}

/// `out[i][j] = x[i] · w[j]` for every input row `i < m` and the weight rows `cols`,
/// on the calling thread, with `scratch` (at least [`scratch_floats`]`(m, k)` f32s) for
/// weight rows converted to f32.
///
/// # Safety
///
/// `out` addresses an `m × N` matrix whose columns `cols` nothing else touches during
/// the call; `x` holds `m` rows.
pub(crate) unsafe fn linear_rows(
    level: Level,
    x: InputRows<'_>,
    m: usize,
    w: WeightRows<'_>,
    cols: Range<usize>,
    scratch: &mut [f32],
    out: OutPtr,
) {
    let k = x.k;
    let write = |rows: Range<usize>, cg: Range<usize>, t: &TileOut| {
        for (i, ti) in rows.zip(t) {
            for (j, &v) in cg.clone().zip(ti) {
                // SAFETY: `(i, j)` is inside the `m × N` matrix, in the columns this
                // call owns (the caller's contract).
                unsafe { *out.ptr().add(i * out.ldc() + j) = v };
            }
        }
    };
    let convert = m >= R_MAX && !matches!(w.values, Values::F32(_));
    if !convert {
        // Few input rows (decode), or f32 weights: tiles straight from the weights.
        let (r_max, c_max) = if m == 1 {
            (1, C_DECODE)
        } else {
            (R_MAX, c_prefill(level))
        };
        let block = x_block_rows(m, k, r_max);
        for mb in (0..m).step_by(block) {
            let mb_end = (mb + block).min(m);
            for cg in step_ranges(cols.clone(), c_max) {
                for rows in step_ranges(mb..mb_end, r_max) {
                    let t = dot_tile(level, x, rows.clone(), w, cg.clone());
                    write(rows, cg.clone(), &t);
                }
            }
        }
        return;
    }
    let block = x_block_rows(m, k, R_MAX);
    for mb in (0..m).step_by(block) {
        let mb_end = (mb + block).min(m);
        for cg in step_ranges(cols.clone(), c_prefill(level)) {
            let converted = &mut scratch[..cg.len() * k];
            for (j, dst) in cg.clone().zip(converted.chunks_exact_mut(k)) {
                let start = w.offset + j * w.row_stride;
                match w.values {
                    Values::F16(v) => convert::f16_to_f32(level, &v[start..start + k], dst),
                    Values::BF16(v) => convert::bf16_to_f32(level, &v[start..start + k], dst),
                    Values::F32(v) => dst.copy_from_slice(&v[start..start + k]),
                    Values::Blocks { .. } => panic!("dot rows over block-quantized weights"),
                }
            }
            let wf = WeightRows {
                values: Values::F32(converted),
                offset: 0,
                row_stride: k,
            };
            for rows in step_ranges(mb..mb_end, R_MAX) {
                let t = dot_tile(level, x, rows.clone(), wf, 0..cg.len());
                write(rows, cg.clone(), &t);
            }
        }
    }
}

/// Input rows per block: [`X_BLOCK_BYTES`] of them, a multiple of the tile height.
fn x_block_rows(m: usize, k: usize, r_max: usize) -> usize {
    let rows = X_BLOCK_BYTES / (k.max(1) * size_of::<f32>());
    (rows / r_max * r_max).max(r_max).min(m.max(1))
}

/// `range` cut into consecutive pieces of `step` (the last one shorter).
fn step_ranges(range: Range<usize>, step: usize) -> impl Iterator<Item = Range<usize>> {
    range
        .clone()
        .step_by(step)
        .map(move |s| s..(s + step).min(range.end))
}
