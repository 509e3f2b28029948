//! One task's share of a quantized product: a range of weight rows (or of row-interleaved
//! groups) swept over a list of activation rows, the rows in blocks that stay in L2 and
//! in tiles of up to [`ROWS_PER_DOT`] per kernel call (a [`GroupKernel`]'s own rows for
//! the interleaved groups), so each weight block is unpacked
//! once per tile. `linear` sweeps its rows in order; `expert_linear` sweeps the rows
//! routed to one expert over that expert's weights ([`RowMap`]). Each output is one
//! kernel's sum for one (weight row, activation row) pair, the same bits in any tile, so
//! how the rows are grouped never shows in the result.

use std::ops::Range;

use super::ROWS_PER_DOT;
use super::acts::QuantizedActs;
use super::kernels::{ActRow, DotFn, GroupKernel, MAX_GROUP_ROWS};
use crate::parallel::DisjointWrites;

/// Activation bytes kept hot (in L2) while a block of weight rows sweeps over them.
const ACT_BLOCK_BYTES: usize = 192 * 1024;

/// Weight rows a task handles per sweep over an activation block.
const WEIGHT_ROWS_PER_BLOCK: usize = 32;

/// Which activation row the `i`-th row of a sweep reads and which output row it writes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RowMap<'a> {
    /// Rows `0..count` in order: row `i` reads activation row `i`, writes output row `i`.
    Identity(usize),
    /// Routed `(token, slot)` rows: row `i` writes output row `pairs[i]` (`t · slots + s`)
    /// and reads activation row `pairs[i]`, or with `shared` the token's one row
    /// (`pairs[i] / slots`).
    Routed {
        /// The output rows, in order.
        pairs: &'a [u32],
        /// Slots per token.
        slots: usize,
        /// Whether a token's slots share one activation row.
        shared: bool,
    },
}

impl RowMap<'_> {
    /// Rows in the sweep.
    pub(crate) fn len(&self) -> usize {
        match self {
            RowMap::Identity(count) => *count,
            RowMap::Routed { pairs, .. } => pairs.len(),
        }
    }

    /// The activation row of row `i`.
    #[inline]
    fn act(&self, i: usize) -> usize {
        match *self {
            RowMap::Identity(_) => i,
            RowMap::Routed {
                pairs,
                slots,
                shared,
            } => {
                let pair = pairs[i] as usize;
                if shared { pair / slots } else { pair }
            }
        }
    }

    /// The output row of row `i`.
    #[inline]
    fn out(&self, i: usize) -> usize {
        match *self {
            RowMap::Identity(_) => i,
            RowMap::Routed { pairs, .. } => pairs[i] as usize,
        }
    }
}

/// An output matrix of `n` columns that the tasks of one call write in disjoint parts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outputs {
    /// Element `(row, col)` at `row · n + col`.
    pub(crate) ptr: DisjointWrites<f32>,
    /// Columns (the weight rows of the whole product).
    pub(crate) n: usize,
}

/// Activation rows per L2 block for rows of `row_bytes`: a whole number of tiles of
/// `tile` rows.
fn rows_per_block(row_bytes: usize, tile: usize) -> usize {
    (ACT_BLOCK_BYTES / row_bytes.max(1)).max(tile) / tile * tile
}

/// Row-interleaved weights: `out[map.out(i)][8g..8g + 8]` for the groups `groups` of a
/// weight whose group `g` is the `blocks` records at `w_groups[g · group_bytes..]`, and
/// every row `i` of `map`.
///
/// # Safety
///
/// `eight` was chosen for this CPU's features and for the layout of `w_groups`, whose
/// groups `groups` lie inside it (`groups.end · group_bytes ≤ w_groups.len()`); `acts`
/// holds the rows `map` reads, quantized to the layout's partner with Q8_0 stats where
/// the kernel needs them (the `GemmR8Fn` contract); `out` addresses a matrix with every
/// row `map` writes, whose columns `8 · groups` this call alone touches.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sweep_groups(
    eight: GroupKernel,
    w_groups: &[u8],
    group_bytes: usize,
    groups: Range<usize>,
    acts: &QuantizedActs,
    map: RowMap<'_>,
    out: Outputs,
) {
    let rows = map.len();
    let tile_rows = eight.rows.clamp(1, MAX_GROUP_ROWS);
    let per_block = rows_per_block(acts.row_bytes, tile_rows);
    let mut dots = [[0f32; 8]; MAX_GROUP_ROWS];
    let mut tile = [ActRow {
        blocks: std::ptr::null(),
        scales: std::ptr::null(),
        sums: std::ptr::null(),
    }; MAX_GROUP_ROWS];
    for r0 in (0..rows).step_by(per_block) {
        let r1 = (r0 + per_block).min(rows);
        for group in groups.clone() {
            let w_group = w_groups[group * group_bytes..].as_ptr();
            for t in (r0..r1).step_by(tile_rows) {
                let count = (r1 - t).min(tile_rows);
                for (i, row) in tile[..count].iter_mut().enumerate() {
                    *row = acts.row(map.act(t + i));
                }
                // SAFETY: the caller's contract: the kernel fits this CPU and layout, the
                // group's records lie inside `w_groups`, and each tile row holds
                // `acts.blocks` activation blocks of the partner format.
                unsafe {
                    (eight.product)(acts.blocks, w_group, &tile[..count], &mut dots[..count])
                };
                for (i, row) in dots[..count].iter().enumerate() {
                    // SAFETY: elements (out row, 8g..8g + 8) of the output, whose columns
                    // this call alone writes (the caller's contract); `dots` is local.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            row.as_ptr(),
                            out.ptr.ptr().add(map.out(t + i) * out.n + group * 8),
                            8,
                        )
                    };
                }
            }
        }
    }
}

/// Row-major weights: `out[map.out(i)][j]` for the weight rows `wrows`, row `j` being the
/// `row_bytes` at `w[j · row_stride..]`, and every row `i` of `map`.
///
/// # Safety
///
/// `dot` was chosen for this CPU's features and the weights' format; the rows `wrows`
/// lie inside `w`; `acts` holds the rows `map` reads, quantized to the format's partner;
/// `out` addresses a matrix with every row `map` writes, whose columns `wrows` this call
/// alone touches.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sweep_rows(
    dot: DotFn,
    w: &[u8],
    row_stride: usize,
    row_bytes: usize,
    wrows: Range<usize>,
    acts: &QuantizedActs,
    map: RowMap<'_>,
    out: Outputs,
) {
    let rows = map.len();
    let per_block = rows_per_block(acts.row_bytes, ROWS_PER_DOT);
    let act_bytes = acts.bytes();
    let mut dots = [0f32; ROWS_PER_DOT];
    for r0 in (0..rows).step_by(per_block) {
        let r1 = (r0 + per_block).min(rows);
        for j0 in wrows.clone().step_by(WEIGHT_ROWS_PER_BLOCK) {
            for j in j0..(j0 + WEIGHT_ROWS_PER_BLOCK).min(wrows.end) {
                let w_row = &w[j * row_stride..j * row_stride + row_bytes];
                for t in (r0..r1).step_by(ROWS_PER_DOT) {
                    let count = (r1 - t).min(ROWS_PER_DOT);
                    let mut ptrs = [std::ptr::null::<u8>(); ROWS_PER_DOT];
                    for (i, p) in ptrs[..count].iter_mut().enumerate() {
                        let a = map.act(t + i);
                        *p = act_bytes[a * acts.row_bytes..(a + 1) * acts.row_bytes].as_ptr();
                    }
                    // SAFETY: `dot` fits this CPU and format (the caller's contract);
                    // `w_row` holds the row's blocks and each pointer a row of
                    // activation blocks of the partner format (checked slices).
                    unsafe {
                        dot(
                            acts.blocks,
                            w_row.as_ptr(),
                            &ptrs[..count],
                            &mut dots[..count],
                        )
                    };
                    for (i, &v) in dots[..count].iter().enumerate() {
                        // SAFETY: element (out row, j) of the output; column `j` belongs
                        // to this call alone (the caller's contract).
                        unsafe { *out.ptr.ptr().add(map.out(t + i) * out.n + j) = v };
                    }
                }
            }
        }
    }
}
