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
//! The register tile is up to [`R_MAX`] input rows × [`C_MAX`] weight rows. One input
//! row (decode) streams weight rows from memory over the whole depth, converting halves
//! on the fly: one row at a time on AVX-512, four at a time on AVX2, each of those
//! prefetched a page ahead (see `decode_tiles`). Four input rows or more (prefill) go
//! in depth blocks of [`DEPTH_BLOCK`] values: a group of
//! [`GROUP_ROWS`] weight rows is converted to f32 one depth block at a time (exact, so
//! the arithmetic is the same) and stays in L1 while every 4 × 3 tile of a block of
//! input rows passes over it; the tiles' accumulators wait in
//! scratch between depth blocks, so each output still sums its lanes over the whole
//! depth in order, exactly as a decoded row does.

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

/// Weight rows per tile with one input row, and whether each is prefetched a page
/// ahead. On AVX-512 one row at a time, left to the hardware prefetcher: one sequential
/// stream, which it follows best (a 16-lane accumulator's FMA latency still leaves the
/// core faster than memory). On AVX2 four rows with prefetching: an 8-lane accumulator
/// per row alone would wait on its FMA latency.
fn decode_tiles(level: Level) -> (usize, bool) {
    if level.isa() == crate::isa::Isa::Avx512 {
        (1, false)
    } else {
        (4, true)
    }
}

/// Weight rows per tile with several input rows: 4 × 3 accumulators, 3 weight vectors
/// and one input vector fill the 16 registers of AVX2. AVX-512 takes the same tile: its
/// 4 × 4 ran slower in depth blocks (docs/perf-log.md).
const C_PREFILL: usize = 3;

/// Input rows per block: each weight group's depth block is converted once per block of
/// input rows, and the block's depth slice (128 rows of a depth block: 256 KiB) and
/// accumulators (with AVX-512, 128 × 12 vectors: 96 KiB) stay in L2.
const X_BLOCK_ROWS: usize = 128;
const _: () = assert!(X_BLOCK_ROWS.is_multiple_of(R_MAX));

/// Values per depth block of prefill: a weight group's block ([`GROUP_ROWS`] rows of
/// f32) fills 24 KiB of L1, and each tile runs 32 (AVX-512) or 64 steps per block.
pub(crate) const DEPTH_BLOCK: usize = 512;

/// f32s from one converted weight row to the next: a depth block and a line more, so
/// the group's rows fall on different L1 sets.
const W_ROW_STRIDE: usize = DEPTH_BLOCK + 16;

/// Weight rows per group in prefill, a multiple of the tile width (wider groups
/// overflow a 32 KiB L1 beside the input tile and ran no faster).
const GROUP_ROWS: usize = 12;
const _: () = assert!(GROUP_ROWS.is_multiple_of(C_PREFILL));

/// Weight rows per call with fewer than four input rows (a multiple of every tile
/// width): the results come back in a buffer of `R_MAX × DIRECT_COLS` on the stack.
const DIRECT_COLS: usize = 48;
const _: () = assert!(DIRECT_COLS.is_multiple_of(3) && DIRECT_COLS.is_multiple_of(4));

/// f32s of one output's accumulators at most: one vector (16 lanes on AVX-512, 8 on
/// AVX2) or the portable build's eight one-lane sums.
const ACC_FLOATS_MAX: usize = 16;

/// Accumulators per output: `P` vectors of the ISA (eight one-lane sums on the
/// portable build, one vector elsewhere).
const fn parts<S: Simd>() -> usize {
    if S::LANES == 1 { 8 } else { 1 }
}

/// How far ahead of the values being multiplied each weight row is prefetched, one hint
/// per 64-byte line consumed: a page, so the stream never waits at a page boundary.
const PREFETCH_BYTES: usize = 4096;

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
    /// One block of outputs: `x[rows] · w[cols]` over the values `depth` of each row.
    ///
    /// Weight row `j`'s values for `depth` start at element `w.offset + j · w.row_stride`
    /// (the caller points `w` at the block). `depth` starts on a multiple of
    /// [`DEPTH_BLOCK`] and ends on one, or at `x.k` (the last block: the outputs are
    /// finished into `out`, `[row][col]`, `rows.len() × cols.len()`). Blocks after the
    /// first continue the accumulators `acc` holds (`[row][col]`, [`ACC_FLOATS_MAX`] f32s
    /// apart at most; untouched when one block covers the whole depth). Tiles are up to
    /// `R_MAX × c_max`; `prefetch` asks for each weight row a page ahead (rows streaming
    /// from memory). Panics on ranges out of their operands, short scratch or a block
    /// format.
    pub(crate) fn dot_block<'a, 'b>(
        x: InputRows<'a>,
        rows: Range<usize>,
        w: WeightRows<'a>,
        cols: Range<usize>,
        c_max: usize,
        depth: Range<usize>,
        prefetch: bool,
        acc: &'b mut [f32],
        out: &'b mut [f32],
    ) -> () = block_checked;
}

/// Where one tile's accumulators and outputs live, and which part of the depth it runs.
struct TileSpan<'s> {
    /// Values multiplied in whole vectors from the block's start (a multiple of
    /// `LANES · P`).
    span: usize,
    /// Products past `span` added one by one after the lanes are summed (last block only).
    tail: usize,
    /// Start from zero (the first block) rather than from `acc`.
    first: bool,
    /// Finish the outputs into `out` (the last block) rather than keep them in `acc`.
    last: bool,
    /// The tile's accumulators: output `(i, j)` at `i · acc_row + j · P · LANES`.
    acc: &'s mut [f32],
    acc_row: usize,
    /// The tile's outputs: `(i, j)` at `i · out_row + j`.
    out: &'s mut [f32],
    out_row: usize,
    /// Prefetch the weight rows a page ahead.
    prefetch: bool,
}

/// [`dot_block`]'s kernel: checks the ranges and scratch, then runs its tiles.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn block_checked<S: Simd>(
    s: S,
    x: InputRows<'_>,
    rows: Range<usize>,
    w: WeightRows<'_>,
    cols: Range<usize>,
    c_max: usize,
    depth: Range<usize>,
    prefetch: bool,
    acc: &mut [f32],
    out: &mut [f32],
) {
    let k = x.k;
    let (r, c) = (rows.len(), cols.len());
    if r == 0 || c == 0 {
        return;
    }
    assert!(
        (1..=C_MAX).contains(&c_max),
        "dot tiles {c_max} weight rows wide"
    );
    assert!(rows.end * k <= x.x.len(), "input rows past the input");
    let chunk = S::LANES * parts::<S>();
    let whole = k / chunk * chunk;
    let (first, last) = (depth.start == 0, depth.end == k);
    assert!(
        depth.start <= depth.end
            && depth.end <= k
            && depth.start.is_multiple_of(DEPTH_BLOCK)
            && (last || depth.end.is_multiple_of(DEPTH_BLOCK)),
        "depth block {depth:?} of {k}"
    );
    if !(first && last) {
        assert!(
            acc.len() >= r * c * chunk,
            "accumulators shorter than the block"
        );
    }
    if last {
        assert!(out.len() >= r * c, "outputs shorter than the block");
    }
    // `depth.start ≤ whole` (a multiple of the chunk no larger than k).
    let span = if last {
        whole - depth.start
    } else {
        depth.len()
    };
    let tail = if last { k - whole } else { 0 };
    let used = depth.len();
    let xp = x.x[rows.start * k + depth.start..].as_ptr();
    let start = w.offset + cols.start * w.row_stride;
    let end = w.offset + (cols.end - 1) * w.row_stride + used;
    // Rows `rows` of `x` hold `k` values each (asserted above), so `used` values from
    // `depth.start` in each; the `c` weight rows from `start`, `row_stride` apart, hold
    // `used` values each once `end` is checked against the storage in the arm.
    macro_rules! run {
        ($v:expr, $lane:ty) => {{
            assert!(end <= $v.len(), "weight rows past their storage");
            let wp: *const $lane = $v[start..].as_ptr();
            for rs in step_ranges(0..r, R_MAX) {
                for cs in step_ranges(0..c, c_max) {
                    let a0 = (rs.start * c + cs.start) * chunk;
                    let o0 = rs.start * c + cs.start;
                    let t = TileSpan {
                        span,
                        tail,
                        first,
                        last,
                        acc: if first && last {
                            &mut []
                        } else {
                            &mut acc[a0..]
                        },
                        acc_row: c * chunk,
                        out: if last { &mut out[o0..] } else { &mut [] },
                        out_row: c,
                        prefetch,
                    };
                    // SAFETY: the tile's rows lie inside the checked ranges above.
                    unsafe {
                        tile_any::<S, $lane>(
                            s,
                            xp.add(rs.start * k),
                            k,
                            rs.len(),
                            wp.add(cs.start * w.row_stride),
                            w.row_stride,
                            cs.len(),
                            t,
                        )
                    };
                }
            }
        }};
    }
    match w.values {
        Values::F32(v) => run!(v, f32),
        Values::F16(v) => run!(v, f16),
        Values::BF16(v) => run!(v, bf16),
        Values::Blocks { .. } => panic!("dot block over block-quantized weights"),
    }
}

/// The tile of shape `r × c` (each in `1..=R_MAX`, `1..=C_MAX`): eight one-lane sums per
/// output on the portable build (one input row per tile, the registers hold no more),
/// one vector elsewhere.
///
/// # Safety
///
/// `r` rows of `t.span + t.tail` f32s from `x`, `k` apart, and `c` rows of as many
/// values from `w`, `w_stride` apart, are readable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_any<S: Simd, L: Lane>(
    s: S,
    x: *const f32,
    k: usize,
    r: usize,
    w: *const L,
    w_stride: usize,
    c: usize,
    t: TileSpan<'_>,
) {
    // SAFETY: forwarded contract; every arm's shape is `r × c`, or one row of it at a
    // time.
    unsafe {
        if S::LANES == 1 {
            let TileSpan {
                acc,
                acc_row,
                out,
                out_row,
                ..
            } = t;
            for i in 0..r {
                let row = TileSpan {
                    acc: acc.get_mut(i * acc_row..).unwrap_or_default(),
                    out: out.get_mut(i * out_row..).unwrap_or_default(),
                    acc_row,
                    out_row,
                    ..t
                };
                let xi = x.add(i * k);
                match c {
                    1 => tile::<S, L, 1, 1, 8>(s, xi, k, w, w_stride, row),
                    2 => tile::<S, L, 1, 2, 8>(s, xi, k, w, w_stride, row),
                    3 => tile::<S, L, 1, 3, 8>(s, xi, k, w, w_stride, row),
                    _ => tile::<S, L, 1, 4, 8>(s, xi, k, w, w_stride, row),
                }
            }
            return;
        }
        match (r, c) {
            (1, 1) => tile::<S, L, 1, 1, 1>(s, x, k, w, w_stride, t),
            (1, 2) => tile::<S, L, 1, 2, 1>(s, x, k, w, w_stride, t),
            (1, 3) => tile::<S, L, 1, 3, 1>(s, x, k, w, w_stride, t),
            (1, 4) => tile::<S, L, 1, 4, 1>(s, x, k, w, w_stride, t),
            (2, 1) => tile::<S, L, 2, 1, 1>(s, x, k, w, w_stride, t),
            (2, 2) => tile::<S, L, 2, 2, 1>(s, x, k, w, w_stride, t),
            (2, 3) => tile::<S, L, 2, 3, 1>(s, x, k, w, w_stride, t),
            (2, 4) => tile::<S, L, 2, 4, 1>(s, x, k, w, w_stride, t),
            (3, 1) => tile::<S, L, 3, 1, 1>(s, x, k, w, w_stride, t),
            (3, 2) => tile::<S, L, 3, 2, 1>(s, x, k, w, w_stride, t),
            (3, 3) => tile::<S, L, 3, 3, 1>(s, x, k, w, w_stride, t),
            (3, 4) => tile::<S, L, 3, 4, 1>(s, x, k, w, w_stride, t),
            (_, 1) => tile::<S, L, 4, 1, 1>(s, x, k, w, w_stride, t),
            (_, 2) => tile::<S, L, 4, 2, 1>(s, x, k, w, w_stride, t),
            (_, 3) => tile::<S, L, 4, 3, 1>(s, x, k, w, w_stride, t),
            _ => tile::<S, L, 4, 4, 1>(s, x, k, w, w_stride, t),
        }
    }
}

/// One `R × C` register tile over one depth block, `P` accumulators per output
/// (elements `e` go to accumulator `(e / LANES) % P`, lane `e % LANES`): from zero or
/// from `t.acc`, `t.span` values in whole vectors, then back into `t.acc`, or (the last
/// block) the accumulators summed, the tail added one product at a time, into `t.out`.
///
/// # Safety
///
/// `R` rows of `t.span + t.tail` f32s from `x`, `k` apart, and `C` rows of as many
/// values from `w`, `w_stride` apart, are readable.
#[inline(always)]
unsafe fn tile<S: Simd, L: Lane, const R: usize, const C: usize, const P: usize>(
    s: S,
    x: *const f32,
    k: usize,
    w: *const L,
    w_stride: usize,
    t: TileSpan<'_>,
) {
    let lanes = S::LANES;
    let chunk = lanes * P;
    let whole = t.span;
    let mut acc = [[[s.splat(0.0); P]; C]; R];
    // Accumulator `p` of output `(i, j)` in `t.acc`.
    let slot = |i: usize, j: usize, p: usize| {
        let at = i * t.acc_row + j * chunk + p * lanes;
        at..at + lanes
    };
    if !t.first {
        for (i, row) in acc.iter_mut().enumerate() {
            for (j, parts) in row.iter_mut().enumerate() {
                for (p, v) in parts.iter_mut().enumerate() {
                    *v = s.load(&t.acc[slot(i, j, p)]);
                }
            }
        }
    }
    let mut e = 0;
    // SAFETY: every step reads below `whole` in its rows (`e + chunk ≤ whole`);
    // prefetches never fault.
    unsafe {
        if t.prefetch {
            // Chunks per 64-byte line of a weight row (one prefetch hint per line).
            let per_line = (64 / (chunk * size_of::<L>())).max(1);
            let line = chunk * per_line;
            let ahead = PREFETCH_BYTES / size_of::<L>();
            while e + line <= whole {
                for j in 0..C {
                    prefetch_hint(w.wrapping_add(j * w_stride + e + ahead).cast());
                }
                for u in 0..per_line {
                    step::<S, L, R, C, P>(s, x, k, w, w_stride, e + u * chunk, &mut acc);
                }
                e += line;
            }
        }
        while e < whole {
            step::<S, L, R, C, P>(s, x, k, w, w_stride, e, &mut acc);
            e += chunk;
        }
    }
    if !t.last {
        for (i, row) in acc.iter().enumerate() {
            for (j, parts) in row.iter().enumerate() {
                for (p, &v) in parts.iter().enumerate() {
                    s.store(&mut t.acc[slot(i, j, p)], v);
                }
            }
        }
        return;
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, parts) in row.iter().enumerate() {
            let mut v = parts[0];
            for &part in &parts[1..] {
                v = s.add(v, part);
            }
            let mut sum = s.reduce_add(v);
            for u in whole..whole + t.tail {
                // SAFETY: `u < span + tail` in row `i` of `x` and row `j` of `w`.
                let (xu, wu) = unsafe { (*x.add(i * k + u), (*w.add(j * w_stride + u)).to_f32()) };
                sum += xu * wu;
            }
            t.out[i * t.out_row + j] = sum;
        }
    }
}

/// One step of [`tile`]: `P` vectors of each row from element `e` on, multiplied into
/// the accumulators.
///
/// # Safety
///
/// As [`tile`], and `e + LANES · P ≤ t.span`.
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
            // SAFETY: `at + LANES` values are readable in weight row `j` (the caller's
            // contract).
            *v = unsafe { L::load_ptr(s, w.add(j * w_stride + at)) };
        }
        for (i, row) in acc.iter_mut().enumerate() {
            // SAFETY: as above, in input row `i`.
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

/// f32s of scratch [`linear_rows`] needs for `m` input rows: with four rows or more, a
/// weight group's converted depth block, the accumulators and the outputs of a block of
/// input rows by a group.
pub(crate) fn scratch_floats(m: usize) -> usize {
    if m < R_MAX {
        return 0;
    }
    let rows = x_block_rows(m);
    GROUP_ROWS * W_ROW_STRIDE + rows * GROUP_ROWS * (ACC_FLOATS_MAX + 1)
}

/// `out[i][j] = x[i] · w[j]` for every input row `i < m` and the weight rows `cols`,
/// on the calling thread, with `scratch` (at least [`scratch_floats`]`(m)` f32s).
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
    let write = |rows: Range<usize>, cg: Range<usize>, res: &[f32]| {
        let width = cg.len();
        for (i, ri) in rows.enumerate() {
            for (j, &v) in cg.clone().zip(&res[i * width..(i + 1) * width]) {
                // SAFETY: `(ri, j)` is inside the `m × N` matrix, in the columns this
                // call owns (the caller's contract).
                unsafe { *out.ptr().add(ri * out.ldc() + j) = v };
            }
        }
    };
    if m < R_MAX {
        // Decode (or a few rows): tiles over the whole depth straight from the weights.
        let (c_max, prefetch) = if m == 1 {
            decode_tiles(level)
        } else {
            (C_PREFILL, true)
        };
        let mut res = [0f32; R_MAX * DIRECT_COLS];
        for cg in step_ranges(cols, DIRECT_COLS) {
            dot_block(
                level,
                x,
                0..m,
                w,
                cg.clone(),
                c_max,
                0..k,
                prefetch,
                &mut [],
                &mut res,
            );
            write(0..m, cg, &res);
        }
        return;
    }
    let block = x_block_rows(m);
    let (wbuf, rest) = scratch.split_at_mut(GROUP_ROWS * W_ROW_STRIDE);
    let (acc, res) = rest.split_at_mut(block * GROUP_ROWS * ACC_FLOATS_MAX);
    let c_max = C_PREFILL;
    for mb in (0..m).step_by(block) {
        let rows = mb..(mb + block).min(m);
        for cg in step_ranges(cols.clone(), GROUP_ROWS) {
            for depth in step_ranges(0..k, DEPTH_BLOCK) {
                let used = depth.len();
                let (wr, wcols) = if let Values::F32(_) = w.values {
                    // f32 weights: the block in place.
                    let wr = WeightRows {
                        offset: w.offset + depth.start,
                        ..w
                    };
                    (wr, cg.clone())
                } else {
                    let converted = &mut wbuf[..cg.len() * W_ROW_STRIDE];
                    for (j, row) in cg.clone().zip(converted.chunks_exact_mut(W_ROW_STRIDE)) {
                        let dst = &mut row[..used];
                        let at = w.offset + j * w.row_stride + depth.start;
                        match w.values {
                            Values::F16(v) => convert::f16_to_f32(level, &v[at..at + used], dst),
                            Values::BF16(v) => convert::bf16_to_f32(level, &v[at..at + used], dst),
                            Values::F32(_) | Values::Blocks { .. } => {
                                unreachable!("converted weights are halves")
                            }
                        }
                    }
                    let wr = WeightRows {
                        values: Values::F32(converted),
                        offset: 0,
                        row_stride: W_ROW_STRIDE,
                    };
                    (wr, 0..cg.len())
                };
                dot_block(
                    level,
                    x,
                    rows.clone(),
                    wr,
                    wcols,
                    c_max,
                    depth,
                    false,
                    acc,
                    res,
                );
            }
            write(rows.clone(), cg, res);
        }
    }
}

/// Input rows per block: all `m`, at most [`X_BLOCK_ROWS`].
fn x_block_rows(m: usize) -> usize {
    m.clamp(1, X_BLOCK_ROWS)
}

/// `range` cut into consecutive pieces of `step` (the last one shorter).
fn step_ranges(range: Range<usize>, step: usize) -> impl Iterator<Item = Range<usize>> {
    range
        .clone()
        .step_by(step)
        .map(move |s| s..(s + step).min(range.end))
}
