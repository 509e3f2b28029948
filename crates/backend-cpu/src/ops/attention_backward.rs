//! The attention gradient for F32 queries, keys, values and upstream gradient: what
//! training through causal attention needs.
//!
//! Work items are `(lead, kv head)` pairs: an item recomputes, for every query row of the
//! heads sharing that KV head, the probabilities over its visible keys (no score matrix
//! is stored, as in a flash backward), and accumulates `dq` for those query rows and
//! `dk`, `dv` for that KV head's key rows. Items touch disjoint output elements, so they
//! run on the worker pool without synchronisation. Per row the kernel keeps two
//! `Tk`-long scratch vectors (scores and `dO·v`) from the pool.

use tempra_tensor::{AttentionParams, DType, Result, Tensor};

use crate::ops::{Exec, Outcome, input, output};
use crate::parallel::DisjointWrites;

/// The outputs and the scratch, shared by the items (each writes disjoint elements).
#[derive(Clone, Copy)]
struct Outputs {
    dq: DisjointWrites<f32>,
    dk: DisjointWrites<f32>,
    dv: DisjointWrites<f32>,
    scratch: DisjointWrites<f32>,
}

/// A strided input: its elements, and the strides of its last three dims plus lead
/// offset arithmetic.
struct Operand<'a> {
    data: &'a [f32],
    offset: usize,
    strides: &'a [usize],
}

impl Operand<'_> {
    /// The start of row `(lead, t, head)` (the last dim has unit stride).
    fn row(&self, lead_offset: usize, t: usize, head: usize, r: usize) -> usize {
        self.offset + lead_offset + t * self.strides[r - 3] + head * self.strides[r - 2]
    }
}

/// `dq`, `dk`, `dv` of causal attention (see [`AttentionParams`]) given the upstream
/// gradient `grad [.., Tq, Hq, Dv]`. Delegates for other dtypes, ranks below 3, inputs
/// whose last dim is not unit-stride, and non-contiguous outputs.
pub(crate) fn attention_backward(
    exec: &Exec<'_>,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    params: &AttentionParams,
    grad: &Tensor,
    dq: &mut Tensor,
    dk: &mut Tensor,
    dv: &mut Tensor,
) -> Result<Outcome> {
    let r = q.rank();
    let all_f32 = [q, k, v, grad].iter().all(|t| t.dtype() == DType::F32)
        && [&*dq, &*dk, &*dv].iter().all(|t| t.dtype() == DType::F32);
    if !all_f32 || r < 3 || [k, v, grad].iter().any(|t| t.rank() != r) {
        return Ok(Outcome::Delegate);
    }
    let (tq, hq, d) = (q.dims()[r - 3], q.dims()[r - 2], q.dims()[r - 1]);
    let (tk, hkv, dvn) = (k.dims()[r - 3], k.dims()[r - 2], v.dims()[r - 1]);
    let unit_last = |t: &Tensor| t.dims()[r - 1] <= 1 || t.layout().strides()[r - 1] == 1;
    if hkv == 0 || hq % hkv != 0 || ![q, k, v, grad].iter().all(|t| unit_last(t)) {
        return Ok(Outcome::Delegate);
    }
    let contiguous = [&*dq, &*dk, &*dv]
        .iter()
        .all(|t| t.layout().is_contiguous() && t.layout().offset() == 0);
    if !contiguous {
        return Ok(Outcome::Delegate);
    }
    let (Some(qd), Some(kd), Some(vd), Some(gd)) = (
        input::<f32>(q),
        input::<f32>(k),
        input::<f32>(v),
        input::<f32>(grad),
    ) else {
        return Ok(Outcome::Delegate);
    };
    fn operand<'a>(t: &'a Tensor, data: &'a [f32]) -> Operand<'a> {
        Operand {
            data,
            offset: t.layout().offset(),
            strides: t.layout().strides(),
        }
    }
    let (oq, ok, ov, og) = (
        operand(q, qd),
        operand(k, kd),
        operand(v, vd),
        operand(grad, gd),
    );
    let lead_dims = q.dims()[..r - 3].to_vec();
    let n_lead: usize = lead_dims.iter().product();
    let (Some(dq_s), Some(dk_s), Some(dv_s)) =
        (output::<f32>(dq), output::<f32>(dk), output::<f32>(dv))
    else {
        return Ok(Outcome::Delegate);
    };
    dq_s.fill(0.0);
    dk_s.fill(0.0);
    dv_s.fill(0.0);
    let items = n_lead * hkv;
    let mut scratch = exec.scratch_f32("attention_backward", 2 * tk * items.max(1))?;
    let outputs = Outputs {
        dq: DisjointWrites::new(dq_s),
        dk: DisjointWrites::new(dk_s),
        dv: DisjointWrites::new(dv_s),
        scratch: DisjointWrites::new(scratch.as_mut_slice::<f32>()),
    };
    let lead_offset = |strides: &[usize], mut lead: usize| -> usize {
        let mut o = 0;
        for dim in (0..r - 3).rev() {
            o += (lead % lead_dims[dim]) * strides[dim];
            lead /= lead_dims[dim];
        }
        o
    };
    let group = hq / hkv;
    let (scale, softcap) = (params.scale, params.softcap);
    exec.workers.parallel_for(items, 1, |range| {
        // The whole struct (its Sync impl), not its raw-pointer fields one by one.
        let outputs = &outputs;
        for item in range {
            let (lead, kvh) = (item / hkv, item % hkv);
            // SAFETY: each item owns scratch `item·2Tk .. (item+1)·2Tk`, inside the lease
            // of `2·Tk·items` f32 that outlives the parallel call.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(outputs.scratch.ptr().add(item * 2 * tk), 2 * tk)
            };
            let (scores, dps) = buf.split_at_mut(tk);
            let (ql, kl, vl, gl) = (
                lead_offset(oq.strides, lead),
                lead_offset(ok.strides, lead),
                lead_offset(ov.strides, lead),
                lead_offset(og.strides, lead),
            );
            for h in kvh * group..(kvh + 1) * group {
                for t in 0..tq {
                    let keys = params.key_range(params.q_start + t, tk);
                    let (lo, hi) = (keys.start, keys.end);
                    if lo >= hi {
                        continue;
                    }
                    let qrow = &oq.data[oq.row(ql, t, h, r)..][..d];
                    let grow = &og.data[og.row(gl, t, h, r)..][..dvn];
                    let (scores, dps) = (&mut scores[lo..hi], &mut dps[lo..hi]);
                    let mut max = f32::NEG_INFINITY;
                    for (j, (score, dp)) in (lo..hi).zip(scores.iter_mut().zip(dps.iter_mut())) {
                        let krow = &ok.data[ok.row(kl, j, kvh, r)..][..d];
                        let raw = dot(qrow, krow) * scale;
                        let s = match softcap {
                            Some(c) => c * (raw / c).tanh(),
                            None => raw,
                        };
                        *score = s;
                        max = max.max(s);
                        let vrow = &ov.data[ov.row(vl, j, kvh, r)..][..dvn];
                        *dp = dot(grow, vrow);
                    }
                    let mut sum = 0.0f32;
                    for s in scores.iter_mut() {
                        *s = (*s - max).exp();
                        sum += *s;
                    }
                    let inv = 1.0 / sum;
                    let mut p_dp = 0.0f32;
                    for (p, &dp) in scores.iter_mut().zip(dps.iter()) {
                        *p *= inv; // now p_j
                        p_dp += *p * dp;
                    }
                    // Output rows are contiguous: [lead, t, head, e].
                    let dq_row = ((lead * tq + t) * hq + h) * d;
                    for (j, (&p, &dp)) in (lo..hi).zip(scores.iter().zip(dps.iter())) {
                        let dcap = match softcap {
                            Some(c) => {
                                // p is not the capped score; recompute it from q·k.
                                let krow = &ok.data[ok.row(kl, j, kvh, r)..][..d];
                                let s = c * (dot(qrow, krow) * scale / c).tanh();
                                1.0 - (s / c) * (s / c)
                            }
                            None => 1.0,
                        };
                        let du = p * (dp - p_dp) * dcap * scale;
                        let krow = &ok.data[ok.row(kl, j, kvh, r)..][..d];
                        let kv_row = (lead * tk + j) * hkv + kvh;
                        // SAFETY: item (lead, kvh) alone writes the dk/dv rows of
                        // (lead, *, kvh) and the dq rows of (lead, *, kvh's query heads);
                        // every index is inside the contiguous outputs of shapes
                        // [.., Tk, Hkv, D], [.., Tk, Hkv, Dv], [.., Tq, Hq, D].
                        unsafe {
                            let dvr = std::slice::from_raw_parts_mut(
                                outputs.dv.ptr().add(kv_row * dvn),
                                dvn,
                            );
                            axpy(p, grow, dvr);
                            let dkr =
                                std::slice::from_raw_parts_mut(outputs.dk.ptr().add(kv_row * d), d);
                            axpy(du, qrow, dkr);
                            let dqr =
                                std::slice::from_raw_parts_mut(outputs.dq.ptr().add(dq_row), d);
                            axpy(du, krow, dqr);
                        }
                    }
                }
            }
        }
    });
    drop(scratch);
    Ok(Outcome::Done)
}

/// `Σ a·b` in eight fixed lanes (the same order for every call, so results do not
/// depend on the thread count).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for ((lane, &xv), &yv) in acc.iter_mut().zip(x).zip(y) {
            *lane += xv * yv;
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for (&xv, &yv) in ar.iter().zip(br) {
        s += xv * yv;
    }
    s
}

/// `y += alpha·x`.
#[inline]
fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += alpha * x;
    }
}
