//! Fused causal attention over an f32, f16 or block-quantized (Q8_0, Q4_0, Q4_1, Q5_0,
//! Q5_1) KV cache (F32 queries).
//!
//! Work items are tiles of query rows that share a KV head: `(lead, position block, kv
//! head, sub-group)`, the sub-group being `rows` consecutive query heads of that KV head's
//! GQA group and the position block up to `cap / rows` consecutive query positions, so
//! each key and value row is read (and converted) once per tile and used by every row of
//! it. Without it a model without GQA (one head per KV head) attended one query row per
//! pass over the keys: 1 multiply-add per load, a third of a 110M model's prefill time.
//! Every tile runs the narrow kernel, up to `MAX_ROWS` rows, which is row-invariant (a
//! query's output does not depend on the tile it shares). With
//! [`crate::CpuConfig::fast_prefill`], prefill tiles take up to `WIDE_ROWS` rows, and tiles
//! wider than the narrow kernel's run blocked, both products through the GEMM micro-kernel
//! (`kernels::attention_blocked`): faster, but not the narrow kernel's arithmetic. Items are split between
//! threads; tiles shrink only when there are too few for the threads.
//! K and V may be any strided views (a `narrow` of a cache) whose last dim is
//! unit-stride; queries may have any strides. Block-quantized keys or values always run
//! the narrow kernel, which dequantizes each block of keys into a per-task staging part
//! of one pool lease.

use tempra_tensor::{AttentionParams, DType, Result, Tensor};

use crate::gemm::{self, OutPtr};
use crate::kernels::attention::{
    self as kernels, KvData, KvRows, MAX_HEAD_DIM, MAX_ROWS, Scratch, Tile, pad,
};
use crate::kernels::attention_blocked::{self as blocked, WIDE_ROWS, WideScratch};
use crate::ops::{Exec, Outcome, input, output};
use crate::parallel::TaskErrors;
use crate::task_scratch::{TaskScratch, max_tasks};

/// Multiply-adds per task below which attention stays on one thread. Low for its work:
/// decode attention waits on cached K/V rows from DRAM more than it computes, so even a
/// small model's few decode tiles gain from being split over the threads (a 128 Ki
/// threshold kept them together).
const MIN_TASK_FMAS: usize = 1 << 15;

/// `out [.., Tq, Hq, Dv]` = causal attention of `q` over `k`, `v` (see
/// [`AttentionParams`]), with per-head `sinks` where given (each row's online softmax
/// starts from its head's sink).
pub(crate) fn attention(
    exec: &Exec<'_>,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sinks: Option<&Tensor>,
    params: &AttentionParams,
    out: &mut Tensor,
) -> Result<Outcome> {
    let r = q.rank();
    if q.dtype() != DType::F32 || r < 3 || k.rank() != r || v.rank() != r {
        return Ok(Outcome::Delegate);
    }
    let (tq, hq, d) = (q.dims()[r - 3], q.dims()[r - 2], q.dims()[r - 1]);
    // Sinks as an f32 slice per query head (a strided or non-f32 view: the reference).
    let sink_values = match sinks {
        Some(s) => match (input::<f32>(s), s.layout().contiguous_range()) {
            (Some(values), Some(range)) if range.len() == hq => match values.get(range) {
                Some(values) => Some(values),
                None => return Ok(Outcome::Delegate),
            },
            _ => return Ok(Outcome::Delegate),
        },
        None => None,
    };
    let (tk, hkv, dv) = (k.dims()[r - 3], k.dims()[r - 2], v.dims()[r - 1]);
    let (ks, vs, qs) = (
        k.layout().strides(),
        v.layout().strides(),
        q.layout().strides(),
    );
    let unit_rows = (d <= 1 || ks[r - 1] == 1) && (dv <= 1 || vs[r - 1] == 1);
    if d > MAX_HEAD_DIM || dv > MAX_HEAD_DIM || hkv == 0 || hq % hkv != 0 || !unit_rows {
        return Ok(Outcome::Delegate);
    }
    let (Some(kd), Some(vd), Some(qd)) = (kv_data(k), kv_data(v), input::<f32>(q)) else {
        return Ok(Outcome::Delegate);
    };
    let staged = kd.is_blocks() || vd.is_blocks();
    let group = hq / hkv;
    let lead_dims = &q.dims()[..r - 3];
    let n_lead: usize = lead_dims.iter().product();
    let threads = exec.workers.threads();
    let items_with = |positions: usize, n_sub: usize| n_lead * tq.div_ceil(positions) * hkv * n_sub;
    // Prefill (several positions) whose tiles can hold more rows than the narrow kernel's
    // MAX_ROWS runs blocked, through the GEMM kernel: tiles of up to WIDE_ROWS rows, the
    // group split only where it is wider than that. The choice depends on the shape
    // alone, never on the thread count (results agree bitwise across thread counts).
    let wide_sub = (1..=group)
        .find(|c| group % c == 0 && group / c <= WIDE_ROWS)
        .unwrap_or(group);
    let wide_rows = group / wide_sub;
    // Blocked tiles compute another arithmetic than the narrow kernel: only with a fast
    // prefill (`CpuConfig::fast_prefill`), which gives up row invariance.
    // Block-quantized keys or values run the narrow kernel (its staging), fast or not.
    let wide = exec.fast_prefill
        && !staged
        && tq > 1
        && wide_rows * (WIDE_ROWS / wide_rows).min(tq) > MAX_ROWS;
    let (n_sub, positions) = if wide {
        // Positions per tile: fill the tile, halving while fewer than two tiles per
        // thread remain, as long as the tile stays wider than a narrow one.
        let narrowest = MAX_ROWS / wide_rows + 1;
        let mut positions = (WIDE_ROWS / wide_rows).min(tq);
        while positions / 2 >= narrowest && items_with(positions, wide_sub) < 2 * threads {
            positions /= 2;
        }
        (wide_sub, positions)
    } else {
        // Tile rows: the whole GQA group (up to MAX_ROWS) unless that leaves fewer than
        // two tiles per thread.
        let base_items = n_lead * tq * hkv;
        let mut n_sub = group;
        for cand in (1..=group).filter(|c| group % c == 0 && group / c <= MAX_ROWS) {
            n_sub = cand;
            if base_items * cand >= 2 * threads {
                break;
            }
        }
        // Positions per tile: fill the tile's rows, as long as two tiles per thread
        // remain.
        let mut positions = (MAX_ROWS / (group / n_sub)).clamp(1, tq.max(1));
        while positions > 1 && items_with(positions, n_sub) < 2 * threads {
            positions /= 2;
        }
        (n_sub, positions)
    };
    let rows = group / n_sub;
    let tile_rows = positions * rows;
    debug_assert!(tile_rows <= if wide { WIDE_ROWS } else { MAX_ROWS });
    let kern = gemm::kernel_for(exec.level);
    let n_blocks = tq.div_ceil(positions);
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if y.is_empty() {
        return Ok(Outcome::Done);
    }
    // The window as a number (no window: every key), read once: deriving each row's
    // range from the `Option` inside the 48-row loop let LLVM branch on the payload of a
    // `None` (valgrind: a jump on an uninitialised value).
    let window = match params.window {
        Some(w) if params.causal => w,
        _ => usize::MAX,
    };
    let keys_per_query = window.min(tk).max(1);
    let fmas_per_item = tile_rows * keys_per_query * (d + dv);
    let min_items = MIN_TASK_FMAS.div_ceil(fmas_per_item.max(1));
    let (q_off, k_off, v_off) = (
        q.layout().offset(),
        k.layout().offset(),
        v.layout().offset(),
    );
    let lead_offset = |strides: &[usize], mut lead: usize| -> usize {
        let mut o = 0;
        for dim in (0..r - 3).rev() {
            o += (lead % lead_dims[dim]) * strides[dim];
            lead /= lead_dims[dim];
        }
        o
    };
    let (dp, level, scale, softcap) = (pad(d), exec.level, params.scale, params.softcap);
    // Output row `(lead·Tq + t)·Hq + h` holds `Dv` values (the output is contiguous).
    let y_rows = OutPtr::new(y, dv);
    let n_items = n_lead * n_blocks * hkv * n_sub;
    let errors = TaskErrors::default();
    let attend_items = |items: std::ops::Range<usize>, buf: Option<&mut [f32]>| {
        let mut scratch = Scratch::new();
        let mut q_small = [0f32; MAX_ROWS * MAX_HEAD_DIM];
        let mut out_small = [0f32; MAX_ROWS * MAX_HEAD_DIM];
        let (qbuf, tile_out, mut wide_scratch, staging) = match buf {
            Some(buf) if wide => {
                let (q, rest) = buf.split_at_mut(WIDE_ROWS * dp);
                let (o, rest) = rest.split_at_mut(WIDE_ROWS * dv);
                let none: &mut [f32] = &mut [];
                (q, o, Some(WideScratch::new(&kern, d, dv, rest)), none)
            }
            Some(staging) => (&mut q_small[..], &mut out_small[..], None, staging),
            None => (&mut q_small[..], &mut out_small[..], None, &mut [][..]),
        };

        // Items are ordered (lead, position block, kv head, sub-group), like the output
        // rows; walk them grouped by (kv head, sub-group) instead, so consecutive tiles
        // read the same key/value rows while they are still in cache (prefill).
        let per_block = hkv * n_sub;
        let by_head = (0..per_block).flat_map(|g| {
            let first = items.start + (g + per_block - items.start % per_block) % per_block;
            (first..items.end).step_by(per_block)
        });
        for item in by_head {
            let sub = item % n_sub;
            let rest = item / n_sub;
            let kvh = rest % hkv;
            let rest = rest / hkv;
            let t0 = (rest % n_blocks) * positions;
            let lead = rest / n_blocks;
            let h0 = kvh * group + sub * rows;
            let here = positions.min(tq - t0);
            let n_rows = here * rows;
            let keys: [std::ops::Range<usize>; WIDE_ROWS] = std::array::from_fn(|row| {
                let q_pos = params.q_start + t0 + row / rows;
                if !params.causal {
                    return 0..tk;
                }
                let hi = (q_pos + 1).min(tk);
                let lo = (q_pos + 1).saturating_sub(window);
                lo..hi.max(lo)
            });
            let q_lead = q_off + lead_offset(qs, lead);
            for row in 0..n_rows {
                let (t, h) = (t0 + row / rows, h0 + row % rows);
                let start = q_lead + t * qs[r - 3] + h * qs[r - 2];
                for (e, slot) in qbuf[row * dp..row * dp + d].iter_mut().enumerate() {
                    *slot = qd[start + e * qs[r - 1]] * scale;
                }
            }
            let kr = KvRows {
                base: k_off + lead_offset(ks, lead) + kvh * ks[r - 2],
                stride: ks[r - 3],
                dim: d,
            };
            let vr = KvRows {
                base: v_off + lead_offset(vs, lead) + kvh * vs[r - 2],
                stride: vs[r - 3],
                dim: dv,
            };
            // Each tile row's sink, only for a model that has them.
            let row_sinks: Option<[f32; WIDE_ROWS]> = sink_values.map(|values| {
                std::array::from_fn(|row| {
                    if row < n_rows {
                        values[h0 + row % rows]
                    } else {
                        f32::NEG_INFINITY
                    }
                })
            });
            let tile = Tile {
                q: &qbuf[..n_rows * dp],
                rows: n_rows,
                keys: &keys[..n_rows],
                softcap,
                sinks: row_sinks.as_ref().map(|s| &s[..n_rows]),
            };
            let dst = &mut tile_out[..n_rows * dv];
            match wide_scratch.as_mut() {
                Some(ws) => blocked::attend_wide_rows(level, kern, &tile, kd, kr, vd, vr, ws, dst),
                None => kernels::attend_tile_rows(
                    level,
                    &tile,
                    kd,
                    kr,
                    vd,
                    vr,
                    &mut scratch,
                    staging,
                    dst,
                ),
            }
            for (row, values) in dst.chunks_exact(dv.max(1)).enumerate() {
                let (t, h) = (t0 + row / rows, h0 + row % rows);
                // SAFETY: `(lead, t, h)` is one of this item's own output rows (items
                // cover disjoint (position, head) pairs), inside the `n_lead·Tq·Hq × Dv`
                // output.
                unsafe { y_rows.row_segment((lead * tq + t) * hq + h, 0..dv) }
                    .copy_from_slice(values);
            }
        }
    };
    // Blocked tiles (queries, outputs and the packing scratch) or the staging of quantized
    // keys and values: one part per thread of one pool lease made here (see
    // `TaskScratch`).
    let part_len = if wide {
        WIDE_ROWS * (dp + dv) + WideScratch::len(&kern, d, dv)
    } else if staged {
        kernels::staging_len(d, dv)
    } else {
        0
    };
    let wide_parts = if part_len > 0 {
        Some(TaskScratch::new(
            exec.pool,
            "attention",
            max_tasks(exec.workers.threads(), n_items, min_items),
            part_len,
        )?)
    } else {
        None
    };
    exec.workers.parallel_for(n_items, min_items, |items| {
        let result = match &wide_parts {
            Some(parts) => parts.with(|buf| {
                attend_items(items.clone(), Some(buf));
                Ok(())
            }),
            None => {
                attend_items(items.clone(), None);
                Ok(())
            }
        };
        errors.record(result);
    });
    errors.finish()?;
    Ok(Outcome::Done)
}

/// K or V as the kernels read it: f32, f16 or a 32-value block format (`None`: the
/// reference).
fn kv_data(t: &Tensor) -> Option<KvData<'_>> {
    match t.dtype() {
        DType::F32 => input::<f32>(t).map(KvData::F32),
        DType::F16 => input(t).map(KvData::F16),
        dtype @ (DType::Q8_0 | DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1) => t
            .storage()
            .host_bytes()
            .ok()
            .map(|bytes| KvData::Blocks(dtype, bytes)),
        _ => None,
    }
}
