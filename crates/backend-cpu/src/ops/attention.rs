//! Fused causal attention over an f32 or f16 KV cache (F32 queries).
//!
//! Work items are tiles of query rows that share a KV head: `(lead, t, kv head, sub-group)`
//! with the sub-group being `rows` consecutive query heads of that KV head's GQA group, so
//! each key and value row is read (and converted) once per tile. Items are split between
//! threads; the tile size shrinks only when there are too few tiles for the threads.
//! K and V may be any strided views (a `narrow` of a cache) whose last dim is
//! unit-stride; queries may have any strides.

use tempra_tensor::{AttentionParams, DType, Result, Tensor};

use crate::kernels::attention::{
    self as kernels, KvData, KvRows, MAX_HEAD_DIM, MAX_ROWS, Scratch, Tile, pad,
};
use crate::ops::{Exec, Outcome, input, output};

/// Multiply-adds per task below which attention stays on one thread.
const MIN_TASK_FMAS: usize = 1 << 17;

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
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if y.is_empty() {
        return Ok(Outcome::Done);
    }
    let item_len = rows * dv;
    let keys_per_query = params.window.unwrap_or(tk).min(tk).max(1);
    let fmas_per_item = rows * keys_per_query * (d + dv);
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
    exec.workers
        .parallel_chunks_mut(y, item_len, min_items, |items, part| {
            let mut scratch = Scratch::new();
            let mut qbuf = [0f32; MAX_ROWS * MAX_HEAD_DIM];
            // Items are ordered (lead, t, kv head, sub-group), like the output rows; walk
            // them grouped by (kv head, sub-group) instead, so consecutive tiles read the
            // same key/value rows while they are still in cache (prefill).
            let per_position = hkv * n_sub;
            let by_head = (0..per_position).flat_map(|g| {
                let first =
                    items.start + (g + per_position - items.start % per_position) % per_position;
                (first..items.end).step_by(per_position)
            });
            for item in by_head {
                let local = item - items.start;
                let sub = item % n_sub;
                let rest = item / n_sub;
                let kvh = rest % hkv;
                let rest = rest / hkv;
                let t = rest % tq;
                let lead = rest / tq;
                let h0 = kvh * group + sub * rows;
                let q_row0 = q_off + lead_offset(qs, lead) + t * qs[r - 3];
                for g in 0..rows {
                    let start = q_row0 + (h0 + g) * qs[r - 2];
                    for (e, slot) in qbuf[g * dp..g * dp + d].iter_mut().enumerate() {
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
                let q_pos = params.q_start + t;
                let hi = (q_pos + 1).min(tk);
                let lo = params.window.map_or(0, |w| (q_pos + 1).saturating_sub(w));
                let tile = Tile {
                    q: &qbuf[..rows * dp],
                    rows,
                    keys: lo..hi.max(lo),
                    softcap,
                };
                let dst = &mut part[local * item_len..(local + 1) * item_len];
                kernels::attend_tile_rows(level, &tile, kd, kr, vd, vr, &mut scratch, dst);
            }
        });
    Ok(Outcome::Done)
}
