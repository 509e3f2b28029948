//! The routing ops of a mixture of experts over F32 data: `top_k` (a selection per row
//! in the one order of `tempra_tensor::ordering`), `gather` along the last dim and
//! `weighted_sum` over slots (slot after slot, each product rounded before it is added,
//! so a row's sum is the same on every ISA and however rows are batched). Rows are split
//! between threads above a work threshold; any strides are read in place.

use tempra_tensor::ordering::ranks_above;
use tempra_tensor::{DType, Layout, Result, Tensor};

use crate::ops::{Exec, MIN_CHEAP, Outcome, input, min_rows, output, row_starts};
use crate::parallel::{DisjointWrites, TaskErrors};
use crate::strided::Walk;
use crate::task_scratch::{self, TaskScratch};

/// Up to this `k`, `top_k` keeps its best values in a sorted buffer on the stack (one
/// comparison rejects most values); above, it sorts the row's indices in scratch.
const STACK_K: usize = 32;

/// Whether value `a` at `ia` comes before `b` at `ib` (f32s widen exactly).
#[inline]
fn above(a: f32, ia: usize, b: f32, ib: usize) -> bool {
    ranks_above(a as f64, ia, b as f64, ib)
}

/// `top_k` over F32 `x`, into contiguous `values` (F32) and `indices` (U32).
pub(crate) fn top_k(
    exec: &Exec<'_>,
    x: &Tensor,
    values: &mut Tensor,
    indices: &mut Tensor,
) -> Result<Outcome> {
    const OP: &str = "top_k";
    if x.dtype() != DType::F32 || values.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let (n, k) = (x.shape().last(), values.shape().last());
    let step = x.layout().strides()[x.rank() - 1];
    let Some(idx) = output::<u32>(indices) else {
        return Ok(Outcome::Delegate);
    };
    let idx = DisjointWrites::new(idx);
    let Some(vals) = output::<f32>(values) else {
        return Ok(Outcome::Delegate);
    };
    if k == 0 || vals.is_empty() {
        return Ok(Outcome::Done);
    }
    let starts = row_starts(x.layout());
    let walk = Walk::new([&starts]);
    let [row_step] = walk.inner_strides();
    let per_task = min_rows(n, MIN_CHEAP);
    let sorting = k > STACK_K;
    let slots = task_scratch::max_tasks(exec.workers.threads(), vals.len() / k, per_task);
    let scratch = TaskScratch::new(exec.pool, OP, slots, if sorting { n } else { 1 })?;
    let errors = TaskErrors::default();
    exec.workers
        .parallel_chunks_mut(vals, k, per_task, |rows, part| {
            let first = rows.start;
            let mut r = 0;
            walk.for_each_run(rows, |[o], len| {
                for i in 0..len {
                    let row = |j: usize| xs[o + i * row_step + j * step];
                    let out_v = &mut part[r * k..(r + 1) * k];
                    // SAFETY: row `first + r` of the `rows × k` indices belongs to this task
                    // alone (disjoint row ranges), inside the output.
                    let out_i = unsafe {
                        std::slice::from_raw_parts_mut(idx.ptr().add((first + r) * k), k)
                    };
                    if sorting {
                        errors.record(scratch.with(|buf| {
                            sorted_row(
                                &row,
                                n,
                                bytemuck::cast_slice_mut(&mut buf[..n]),
                                out_v,
                                out_i,
                            );
                            Ok(())
                        }));
                    } else {
                        select_row(&row, n, out_v, out_i);
                    }
                    r += 1;
                }
            });
        });
    errors.finish()?;
    Ok(Outcome::Done)
}

/// The best `k = out_v.len()` (≤ [`STACK_K`]) of the `n` values `row(j)`, in order.
fn select_row(row: &impl Fn(usize) -> f32, n: usize, out_v: &mut [f32], out_i: &mut [u32]) {
    let k = out_v.len();
    let mut best = [(0f32, 0usize); STACK_K];
    let mut filled = 0;
    for j in 0..n {
        let v = row(j);
        if filled == k && !above(v, j, best[k - 1].0, best[k - 1].1) {
            continue;
        }
        // The first held value `v` ranks above (ties stay behind the earlier index).
        let at = best[..filled]
            .iter()
            .position(|&(b, bi)| above(v, j, b, bi))
            .unwrap_or(filled);
        let end = filled.min(k - 1);
        best.copy_within(at..end, at + 1);
        best[at] = (v, j);
        filled = (filled + 1).min(k);
    }
    for (slot, &(v, j)) in best[..k].iter().enumerate() {
        out_v[slot] = v;
        out_i[slot] = j as u32;
    }
}

/// The best `k` of the `n` values `row(j)` by sorting their indices in `order` (`n`
/// u32s): the order is strict and total, so an unstable sort gives the one answer.
fn sorted_row(
    row: &impl Fn(usize) -> f32,
    n: usize,
    order: &mut [u32],
    out_v: &mut [f32],
    out_i: &mut [u32],
) {
    for (j, o) in order.iter_mut().enumerate() {
        *o = j as u32;
    }
    let k = out_v.len();
    let cmp = |a: &u32, b: &u32| {
        let (a, b) = (*a as usize, *b as usize);
        if above(row(a), a, row(b), b) {
            std::cmp::Ordering::Less
        } else if a == b {
            std::cmp::Ordering::Equal
        } else {
            std::cmp::Ordering::Greater
        }
    };
    if k < n {
        order.select_nth_unstable_by(k - 1, cmp);
    }
    order[..k].sort_unstable_by(cmp);
    for (slot, &j) in order[..k].iter().enumerate() {
        out_v[slot] = row(j as usize);
        out_i[slot] = j;
    }
}

/// `gather` over F32 `x` and U32 `indices` (any strides) into contiguous F32 `out`; an
/// index past the row (possible only from device ids, which the CPU never sees) reads NaN,
/// as the reference does.
pub(crate) fn gather(
    exec: &Exec<'_>,
    x: &Tensor,
    indices: &Tensor,
    out: &mut Tensor,
) -> Result<Outcome> {
    if x.dtype() != DType::F32 || out.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let (Some(xs), Some(is)) = (input::<f32>(x), input::<u32>(indices)) else {
        return Ok(Outcome::Delegate);
    };
    let r = x.rank();
    let (n, k) = (x.shape().last(), indices.shape().last());
    let (x_step, i_step) = (
        x.layout().strides()[r - 1],
        indices.layout().strides()[r - 1],
    );
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if k == 0 || y.is_empty() {
        return Ok(Outcome::Done);
    }
    let (x_rows, i_rows) = (row_starts(x.layout()), row_starts(indices.layout()));
    let walk = Walk::new([&x_rows, &i_rows]);
    let [xs_step, is_step] = walk.inner_strides();
    exec.workers
        .parallel_chunks_mut(y, k, min_rows(k, MIN_CHEAP), |rows, part| {
            let mut r = 0;
            walk.for_each_run(rows, |[xo, io], len| {
                for i in 0..len {
                    let (xb, ib) = (xo + i * xs_step, io + i * is_step);
                    for (j, o) in part[r * k..(r + 1) * k].iter_mut().enumerate() {
                        let at = is[ib + j * i_step] as usize;
                        *o = if at < n {
                            xs[xb + at * x_step]
                        } else {
                            f32::NAN
                        };
                    }
                    r += 1;
                }
            });
        });
    Ok(Outcome::Done)
}

/// `weighted_sum` over F32 `x [.., k, D]` and `weights [.., k]` (any strides) into
/// contiguous F32 `out [.., D]`.
pub(crate) fn weighted_sum(
    exec: &Exec<'_>,
    x: &Tensor,
    weights: &Tensor,
    out: &mut Tensor,
) -> Result<Outcome> {
    if x.dtype() != DType::F32 || out.dtype() != DType::F32 {
        return Ok(Outcome::Delegate);
    }
    let (Some(xs), Some(ws)) = (input::<f32>(x), input::<f32>(weights)) else {
        return Ok(Outcome::Delegate);
    };
    let r = x.rank();
    let (slots, d) = (x.dims()[r - 2], x.dims()[r - 1]);
    let (slot_stride, step) = (x.layout().strides()[r - 2], x.layout().strides()[r - 1]);
    let w_step = weights.layout().strides()[r - 2];
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if d == 0 || y.is_empty() {
        return Ok(Outcome::Done);
    }
    // One output row per `[k, D]` block of x and `[k]` row of the weights.
    let blocks: Layout = row_starts(&row_starts(x.layout()));
    let w_rows = row_starts(weights.layout());
    let walk = Walk::new([&blocks, &w_rows]);
    let [b_step, wr_step] = walk.inner_strides();
    exec.workers
        .parallel_chunks_mut(y, d, min_rows(d * slots.max(1), MIN_CHEAP), |rows, part| {
            let mut row = 0;
            walk.for_each_run(rows, |[xo, wo], len| {
                for i in 0..len {
                    let out = &mut part[row * d..(row + 1) * d];
                    let (xb, wb) = (xo + i * b_step, wo + i * wr_step);
                    out.fill(0.0);
                    for s in 0..slots {
                        let (w, at) = (ws[wb + s * w_step], xb + s * slot_stride);
                        if step == 1 {
                            // Contiguous: vectorised over `e`, every sum unchanged.
                            for (o, &v) in out.iter_mut().zip(&xs[at..at + d]) {
                                *o += w * v;
                            }
                        } else {
                            for (e, o) in out.iter_mut().enumerate() {
                                *o += w * xs[at + e * step];
                            }
                        }
                    }
                    row += 1;
                }
            });
        });
    Ok(Outcome::Done)
}
