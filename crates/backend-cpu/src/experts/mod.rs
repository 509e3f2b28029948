//! `Backend::expert_linear` on the CPU: the grouped-expert product of a mixture of
//! experts, `out[t, s] = x[t, s] · w[ids[t, s]]ᵀ (+ bias)`.
//!
//! The `(token, slot)` rows are grouped by expert first ([`Routing`]), so each chosen
//! expert's weights are read once per call, by all of its rows together; experts nobody
//! chose are never read (decode reads only the `k` chosen experts' bytes). Each expert's
//! `[N, K]` slice is multiplied by the kernels of `linear` over the same bytes:
//!
//! - block formats: the activation rows are quantized once (a token's row once when its
//!   slots share it, as gate and up projections do), and the sweeps of
//!   [`crate::quantized`] run each expert's weight rows, or row-interleaved groups of a
//!   prepared stack, over the rows routed to it;
//! - F32, F16 and BF16 weights contiguous along `K`: the routed rows are gathered in
//!   expert order into one lease, the dot products of [`crate::gemm::dot_rows`] run per
//!   expert, and the results go back to their rows.
//!
//! Each output is the same kernel sum `linear` computes for that row and expert, so a row
//! is bit-identical alone, in a prompt, in a batch and at any thread count. Tasks split
//! the work by expert and weight rows (groups): the flat range of `(active expert, weight
//! unit)` items is cut into chunks of at least [`crate::quantized::MIN_TASK_BYTES`] of
//! weights (divided by the rows each byte meets), so a decode step's few experts run on
//! one thread when small and over every worker when not.
//!
//! Scratch: one pool lease for the routing (`2E + 1 + T·k` u32s), one for the quantized
//! rows (block formats) or the gathered input and output rows (float formats).

mod routing;

use std::ops::Range;

use tempra_tensor::quant::vec_dot_dtype;
use tempra_tensor::{DType, Result, Tensor, TensorError};

use crate::gemm::OutPtr;
use crate::gemm::dot_rows::{self, InputRows, WeightRows};
use crate::interleaved::{InterleavedWeight, ROW_GROUP};
use crate::matmul::float_values;
use crate::ops::{Outcome, output};
use crate::parallel::{DisjointWrites, TaskErrors};
use crate::products::Products;
use crate::quantized::{MIN_TASK_BYTES, Outputs, QuantizedActs, RowMap, sweep_groups, sweep_rows};
use crate::task_scratch::{self, TaskScratch};

pub(crate) use routing::Routing;

const OP: &str = "expert_linear";

/// F32 `out [T, k, N]` from F32 `x [T, k, K]`, `w [E, N, K]`, host U32 `ids [T, k]` and
/// an F32 `bias [E, N]`; [`Outcome::Delegate`] for layouts the kernels do not take (a
/// strided output, float weights strided along `K`).
pub(crate) fn expert_linear(
    products: &Products<'_>,
    x: &Tensor,
    w: &Tensor,
    ids: &Tensor,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<Outcome> {
    let (experts, n, k) = (w.dims()[0], w.dims()[1], w.dims()[2]);
    let slots = ids.dims()[1];
    let quantized = w.dtype().is_quantized();
    if out.dtype() != DType::F32 || (!quantized && w.layout().strides()[2] != 1 && k > 1) {
        return Ok(Outcome::Delegate);
    }
    let Some(out_slice) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    let pairs = ids.elem_count();
    if pairs == 0 || n == 0 {
        return Ok(Outcome::Done);
    }
    let routing = Routing::new(products.gemm.pool, OP, ids, experts)?;
    if k == 0 {
        out_slice.fill(0.0);
    } else {
        // A token's slots share one row when x is a broadcast `[T, 1, K]`.
        let shared = slots > 1 && x.layout().strides()[1] == 0;
        let rows = if shared {
            x.narrow(1, 0, 1)?
        } else {
            x.clone()
        };
        let routed = Routed {
            routing: &routing,
            slots,
            shared,
        };
        if quantized {
            quantized_experts(products, &rows, w, routed, out_slice)?;
        } else {
            float_experts(products, &rows, w, routed, out_slice)?;
        }
    }
    if let Some(bias) = bias {
        add_expert_bias(bias, &routing, out_slice, n)?;
    }
    Ok(Outcome::Done)
}

/// The routed rows of one call: which pairs each expert has, and how pairs map to the
/// input's rows.
#[derive(Clone, Copy)]
struct Routed<'a> {
    routing: &'a Routing,
    slots: usize,
    shared: bool,
}

impl Routed<'_> {
    /// Expert `e`'s rows as a sweep reads them.
    fn map(&self, e: usize) -> RowMap<'_> {
        RowMap::Routed {
            pairs: self.routing.rows(e),
            slots: self.slots,
            shared: self.shared,
        }
    }

    /// Runs `f(expert, units)` over the `(active expert, weight unit)` items of
    /// `items`, one call per expert the range touches (`units` of each expert).
    fn for_each_expert(
        &self,
        items: Range<usize>,
        units: usize,
        mut f: impl FnMut(usize, Range<usize>),
    ) {
        let active = self.routing.active();
        let mut item = items.start;
        while item < items.end {
            let (a, u0) = (item / units, item % units);
            let u1 = units.min(u0 + (items.end - item));
            f(active[a] as usize, u0..u1);
            item += u1 - u0;
        }
    }

    /// Splits `units` weight units of `unit_bytes` per active expert over the workers
    /// (or runs them here below the threshold) and calls `task` on each range of items.
    fn run(
        &self,
        products: &Products<'_>,
        units: usize,
        unit_bytes: usize,
        task: &(dyn Fn(Range<usize>) + Sync),
    ) {
        let active = self.routing.active().len();
        let items = active * units;
        let rows_per_expert = (self.routing.order().len() / active.max(1)).clamp(1, 8);
        let min_items = MIN_TASK_BYTES
            .div_ceil(unit_bytes.max(1) * rows_per_expert)
            .max(1);
        let par = products.gemm.par;
        if par.threads() > 1 && items >= 2 * min_items {
            par.parallel_for(items, min_items, task);
        } else if items > 0 {
            task(0..items);
        }
    }
}

/// Block-format experts: every input row quantized once, then each expert's weight rows
/// (groups, for a prepared stack) swept over its routed rows.
fn quantized_experts(
    products: &Products<'_>,
    rows: &Tensor,
    w: &Tensor,
    routed: Routed<'_>,
    out: &mut [f32],
) -> Result<()> {
    let (experts, n, k) = (w.dims()[0], w.dims()[1], w.dims()[2]);
    let wd = w.dtype();
    let kernels = &products.quant;
    let dot = kernels.dot(wd).ok_or(TensorError::DType {
        op: OP,
        dtype: wd,
        what: "a weight block format",
    })?;
    let (bb, blocks) = (wd.block_bytes(), k / wd.block_len());
    let ws = w.layout().strides();
    let prepared = InterleavedWeight::of(w);
    // The weights as bytes from expert 0's first unit, and the byte steps between
    // experts and between units (rows, or groups of eight rows).
    let (bytes, expert_step, unit_step, unit_bytes, units) = match prepared {
        Some(p) => {
            // Groups of the prepared stack: expert e's first group is whole groups past
            // expert 0's (the views check that each expert starts on one).
            let group_units = ROW_GROUP * blocks;
            let group_bytes = blocks * p.layout().record_bytes();
            let bytes = p.groups_of(OP, &w.select(0, 0)?)?;
            if !ws[0].is_multiple_of(group_units.max(1)) {
                return Err(TensorError::Argument {
                    op: OP,
                    name: "w",
                    reason: format!("experts of a {} stack must start on a group", p.layout()),
                });
            }
            let expert_step = ws[0] / group_units.max(1) * group_bytes;
            (bytes, expert_step, group_bytes, group_bytes, n / ROW_GROUP)
        }
        None => {
            let bytes = &w.storage().host_bytes()?[w.layout().offset() * bb..];
            (bytes, ws[0] * bb, ws[1] * bb, blocks * bb, n)
        }
    };
    // Every unit of every expert lies inside the storage: the kernels read raw pointers.
    let end = (experts - 1) * expert_step + (units.max(1) - 1) * unit_step + unit_bytes;
    if end > bytes.len() {
        return Err(TensorError::Argument {
            op: OP,
            name: "w",
            reason: "experts run past the storage".into(),
        });
    }
    let eight = prepared.map(|p| kernels.gemm_r8(p.layout()));
    let acts = QuantizedActs::new(
        &products.gemm,
        kernels,
        OP,
        vec_dot_dtype(wd),
        rows,
        eight.is_some(),
    )?;
    let outputs = Outputs {
        ptr: DisjointWrites::new(out),
        n,
    };
    let task = |items: Range<usize>| {
        routed.for_each_expert(items, units, |e, range| {
            let w_expert = &bytes[e * expert_step..];
            let map = routed.map(e);
            match eight {
                // SAFETY: the kernel fits this CPU and the stack's layout; the expert's
                // groups lie inside the storage (checked above); `acts` holds every row
                // the map reads, with the Q8_0 stats the layout needs; the routed rows of
                // an expert are its own and this task alone writes the columns of its
                // groups in them.
                Some(eight) => unsafe {
                    sweep_groups(eight, w_expert, unit_step, range, &acts, map, outputs)
                },
                // SAFETY: as above for the row-major kernel and this task's weight rows.
                None => unsafe {
                    sweep_rows(
                        dot, w_expert, unit_step, unit_bytes, range, &acts, map, outputs,
                    )
                },
            }
        })
    };
    routed.run(products, units, unit_bytes, &task);
    drop(acts);
    Ok(())
}

/// Float experts (F32, F16, BF16, contiguous along `K`): the routed rows gathered in
/// expert order, the dot products of each expert's rows, the results put back.
fn float_experts(
    products: &Products<'_>,
    rows: &Tensor,
    w: &Tensor,
    routed: Routed<'_>,
    out: &mut [f32],
) -> Result<()> {
    let (n, k) = (w.dims()[1], w.dims()[2]);
    let routing = routed.routing;
    let pairs = routing.order().len();
    let g = &products.gemm;
    // [gathered input rows (pairs × K) | their outputs (pairs × N)], in expert order.
    let mut lease = g
        .pool
        .acquire(pairs * (k + n) * size_of::<f32>())
        .map_err(|source| TensorError::Pool { op: OP, source })?;
    let (inputs, results) = lease.as_mut_slice::<f32>()[..pairs * (k + n)].split_at_mut(pairs * k);
    let xs = rows.host_slice::<f32>()?;
    let xl = rows.layout();
    let (s0, s1, step) = (xl.strides()[0], xl.strides()[1], xl.strides()[2]);
    let x_slots = rows.dims()[1];
    for (row, &pair) in inputs.chunks_exact_mut(k).zip(routing.order()) {
        let (t, s) = (pair as usize / routed.slots, pair as usize % routed.slots);
        let start = xl.offset() + t * s0 + if x_slots == 1 { 0 } else { s * s1 };
        for (e, v) in row.iter_mut().enumerate() {
            *v = xs[start + e * step];
        }
    }
    let values = float_values(OP, w)?;
    let ws = w.layout().strides();
    let floats = dot_rows::scratch_floats(routing.max_rows()).max(1);
    let unit_bytes = k * match values {
        crate::gemm::Values::F32(_) => 4,
        _ => 2,
    };
    let min_cols = MIN_TASK_BYTES.div_ceil(unit_bytes).max(1);
    let slots = task_scratch::max_tasks(g.par.threads(), routing.active().len() * n, min_cols);
    let scratch = TaskScratch::new(g.pool, OP, slots, floats)?;
    let (inputs, results_out) = (&*inputs, DisjointWrites::new(results));
    let errors = TaskErrors::default();
    let level = products.level;
    let task = |items: Range<usize>| {
        routed.for_each_expert(items, n, |e, cols| {
            let (start, m) = (routing.start(e), routing.rows(e).len());
            let input = InputRows {
                x: &inputs[start * k..(start + m) * k],
                k,
            };
            let weights = WeightRows {
                values,
                offset: w.layout().offset() + e * ws[0],
                row_stride: ws[1],
            };
            // SAFETY: rows `start..start + m` of the `pairs × n` results are expert
            // `e`'s alone, and this task alone writes their columns `cols`.
            let out = unsafe {
                OutPtr::new(
                    std::slice::from_raw_parts_mut(results_out.ptr().add(start * n), m * n),
                    n,
                )
            };
            errors.record(scratch.with(|buf| {
                // SAFETY: `out` addresses the expert's `m × n` results, columns `cols`
                // this task's alone; `input` holds its `m` rows.
                unsafe { dot_rows::linear_rows(level, input, m, weights, cols, buf, out) };
                Ok(())
            }));
        })
    };
    routed.run(products, n, unit_bytes, &task);
    errors.finish()?;
    for (result, &pair) in results.chunks_exact(n).zip(routing.order()) {
        let p = pair as usize;
        out[p * n..(p + 1) * n].copy_from_slice(result);
    }
    Ok(())
}

/// Adds `bias[e]` (F32 `[E, N]`, any strides) to every row routed to expert `e`.
fn add_expert_bias(bias: &Tensor, routing: &Routing, out: &mut [f32], n: usize) -> Result<()> {
    let values = bias.host_slice::<f32>()?;
    let (offset, bs) = (bias.layout().offset(), bias.layout().strides());
    for &e in routing.active() {
        let e = e as usize;
        for &pair in routing.rows(e) {
            let row = &mut out[pair as usize * n..(pair as usize + 1) * n];
            for (j, o) in row.iter_mut().enumerate() {
                *o += values[offset + e * bs[0] + j * bs[1]];
            }
        }
    }
    Ok(())
}
