//! Fused causal attention over an f32 or f16 KV cache (F32 queries).
//!
//! Work items are tiles of query rows that share a KV head: `(lead, position block, kv
//! head, sub-group)`, the sub-group being `rows` consecutive query heads of that KV head's
//! GQA group and the position block up to `MAX_ROWS / rows` consecutive query positions
//! (prefill), so each key and value row is read (and converted) once per tile and used by
//! up to `MAX_ROWS` query rows. Without it a model without GQA (one head per KV head)
//! attended one query row per pass over the keys: 1 multiply-add per load, a third of a
//! 110M model's prefill time. Items are split between threads; tiles shrink only when
//! there are too few for the threads.
//! K and V may be any strided views (a `narrow` of a cache) whose last dim is
//! unit-stride; queries may have any strides.

use tempra_tensor::{AttentionParams, DType, Result, Tensor};

use crate::gemm::OutPtr;
use crate::kernels::attention::{
    self as kernels, KvData, KvRows, MAX_HEAD_DIM, MAX_ROWS, Scratch, Tile, pad,
};
use crate::ops::{Exec, Outcome, input, output};

/// Multiply-adds per task below which attention stays on one thread. Low for its work:
/// decode attention waits on cached K/V rows from DRAM more than it computes (110m Q4_0
/// decode at 2 threads 150–165 → 168–184 tok/s when its twelve tiles split at 32 Ki
/// instead of 128 Ki).
const MIN_TASK_FMAS: usize = 1 << 15;

/// `out [.., Tq, Hq, Dv]` = causal attention of `q` over `k`, `v` (see
/// [`AttentionParams`]).
pub(crate) fn attention(
    exec: &Exec<'_>,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    params: &AttentionParams,
    out: &mut Tensor,
) -> Result<Outcome> {
    let r = q.rank();
    if q.dtype() != DType::F32 || r < 3 || k.rank() != r || v.rank() != r {
        return Ok(Outcome::Delegate);
    }
    let (tq, hq, d) = (q.dims()[r - 3], q.dims()[r - 2], q.dims()[r - 1]);
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
    let kd = match k.dtype() {
        DType::F32 => input::<f32>(k).map(KvData::F32),
        DType::F16 => input(k).map(KvData::F16),
        _ => None,
    };
    let vd = match v.dtype() {
        DType::F32 => input::<f32>(v).map(KvData::F32),
        DType::F16 => input(v).map(KvData::F16),
        _ => None,
    };
    let (Some(kd), Some(vd), Some(qd)) = (kd, vd, input::<f32>(q)) else {
        return Ok(Outcome::Delegate);
    };
    let group = hq / hkv;
    let lead_dims = &q.dims()[..r - 3];
    let n_lead: usize = lead_dims.iter().product();
    // Tile rows: the whole GQA group (up to MAX_ROWS) unless that leaves fewer than two
    // tiles per thread.
    let base_items = n_lead * tq * hkv;
    let mut n_sub = group;
    for cand in (1..=group).filter(|c| group % c == 0 && group / c <= MAX_ROWS) {
        n_sub = cand;
        if base_items * cand >= 2 * exec.workers.threads() {
            break;
        }
    }
    let rows = group / n_sub;
    // Positions per tile: fill the tile's rows, as long as two tiles per thread remain.
    let items_with = |positions: usize| n_lead * tq.div_ceil(positions) * hkv * n_sub;
    let mut positions = (MAX_ROWS / rows).clamp(1, tq.max(1));
    while positions > 1 && items_with(positions) < 2 * exec.workers.threads() {
        positions /= 2;
    }
    let tile_rows = positions * rows;
    let n_blocks = tq.div_ceil(positions);
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if y.is_empty() {
        return Ok(Outcome::Done);
    }
    let keys_per_query = params.window.unwrap_or(tk).min(tk).max(1);
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
    exec.workers.parallel_for(n_items, min_items, |items| {
        let mut scratch = Scratch::new();
        let mut qbuf = [0f32; MAX_ROWS * MAX_HEAD_DIM];
        let mut tile_out = [0f32; MAX_ROWS * MAX_HEAD_DIM];
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
            let keys: [std::ops::Range<usize>; MAX_ROWS] = std::array::from_fn(|row| {
                let q_pos = params.q_start + t0 + row / rows;
                let hi = (q_pos + 1).min(tk);
                let lo = params.window.map_or(0, |w| (q_pos + 1).saturating_sub(w));
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
            let tile = Tile {
                q: &qbuf[..n_rows * dp],
                rows: n_rows,
                keys: &keys[..n_rows],
                softcap,
            };
            let dst = &mut tile_out[..n_rows * dv];
            kernels::attend_tile_rows(level, &tile, kd, kr, vd, vr, &mut scratch, dst);
            for (row, values) in dst.chunks_exact(dv.max(1)).enumerate() {
                let (t, h) = (t0 + row / rows, h0 + row % rows);
                // SAFETY: `(lead, t, h)` is one of this item's own output rows (items
                // cover disjoint (position, head) pairs), inside the `n_lead·Tq·Hq × Dv`
                // output.
                unsafe { y_rows.row_segment((lead * tq + t) * hq + h, 0..dv) }
                    .copy_from_slice(values);
            }
        }
    });
    Ok(Outcome::Done)
}
