//! Reference kernels for training: embedding scatter-add, one-hot, cross-entropy and its
//! gradient, and the attention gradient (recomputing probabilities, like a flash
//! backward, so no score matrix is stored).

use crate::attention::AttentionParams;
use crate::error::{Result, TensorError};
use crate::layout::StridedIndex;
use crate::reference::host_access::{Reader, Writer, unit_of};
use crate::reference::nn::for_each_row;
use crate::shape::MAX_RANK;
use crate::tensor::Tensor;

fn id_error(op: &'static str, id: usize, position: usize, limit: usize) -> TensorError {
    TensorError::Argument {
        op,
        name: "ids",
        reason: format!("id {id} at position {position} is out of range for {limit}"),
    }
}

pub(crate) fn embedding_backward(ids: &Tensor, grad: &Tensor, out: &mut Tensor) -> Result<()> {
    let (ri, rg) = (Reader::new(ids)?, Reader::new(grad)?);
    let (vocab, d) = (out.dims()[0], out.dims()[1]);
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for unit in 0..vocab * d {
        w.set(offset + unit, 0.0);
    }
    let mut units = StridedIndex::new(ids.layout()).enumerate();
    for_each_row(grad, |row, base, step| {
        let (position, unit) = units
            .next()
            .ok_or_else(|| id_error("embedding_backward", 0, row, vocab))?;
        let id = ri.get(unit) as usize;
        if id >= vocab {
            return Err(id_error("embedding_backward", id, position, vocab));
        }
        for i in 0..d {
            let o = offset + id * d + i;
            let old = w.get(o);
            w.set(o, old + rg.get(base + i * step));
        }
        Ok(())
    })
}

pub(crate) fn one_hot(ids: &Tensor, out: &mut Tensor) -> Result<()> {
    let ri = Reader::new(ids)?;
    let depth = out.shape().last();
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for (position, unit) in StridedIndex::new(ids.layout()).enumerate() {
        let id = ri.get(unit) as usize;
        if id >= depth {
            return Err(id_error("one_hot", id, position, depth));
        }
        for j in 0..depth {
            w.set(
                offset + position * depth + j,
                if j == id { 1.0 } else { 0.0 },
            );
        }
    }
    Ok(())
}

/// Calls `f(row, logit(j), target)` per row of `logits`; `target` is `None` when ignored.
fn for_each_target_row(
    op: &'static str,
    logits: &Tensor,
    targets: &Tensor,
    ignore_index: Option<u32>,
    mut f: impl FnMut(usize, &dyn Fn(usize) -> f64, Option<usize>) -> Result<()>,
) -> Result<()> {
    let (rl, rt) = (Reader::new(logits)?, Reader::new(targets)?);
    let v = logits.shape().last();
    let mut units = StridedIndex::new(targets.layout());
    for_each_row(logits, |row, base, step| {
        let unit = units.next().unwrap_or(0);
        let t = rt.get(unit) as u32;
        let target = if Some(t) == ignore_index {
            None
        } else if (t as usize) < v {
            Some(t as usize)
        } else {
            return Err(id_error(op, t as usize, row, v));
        };
        f(row, &|j| rl.get(base + j * step), target)
    })
}

/// `logsumexp` of a row given by `get` over `n` entries.
fn logsumexp(get: &dyn Fn(usize) -> f64, n: usize) -> f64 {
    let max = (0..n).map(get).fold(f64::NEG_INFINITY, f64::max);
    max + (0..n)
        .map(|j| (get(j) - max).exp())
        .fold(0.0, |acc, v| acc + v)
        .ln()
}

pub(crate) fn cross_entropy(
    logits: &Tensor,
    targets: &Tensor,
    ignore_index: Option<u32>,
    out: &mut Tensor,
) -> Result<()> {
    let v = logits.shape().last();
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for_each_target_row(
        "cross_entropy",
        logits,
        targets,
        ignore_index,
        |row, get, target| {
            let loss = match target {
                Some(t) => logsumexp(get, v) - get(t),
                None => 0.0,
            };
            w.set(offset + row, loss);
            Ok(())
        },
    )
}

pub(crate) fn cross_entropy_backward(
    logits: &Tensor,
    targets: &Tensor,
    ignore_index: Option<u32>,
    grad: &Tensor,
    out: &mut Tensor,
) -> Result<()> {
    let v = logits.shape().last();
    let rg = Reader::new(grad)?;
    let mut grad_units = StridedIndex::new(grad.layout());
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for_each_target_row(
        "cross_entropy_backward",
        logits,
        targets,
        ignore_index,
        |row, get, target| {
            let o = offset + row * v;
            let grad_unit = grad_units.next().unwrap_or(0);
            let Some(t) = target else {
                (0..v).for_each(|j| w.set(o + j, 0.0));
                return Ok(());
            };
            let g = rg.get(grad_unit);
            let lse = logsumexp(get, v);
            for j in 0..v {
                let p = (get(j) - lse).exp();
                w.set(o + j, (p - if j == t { 1.0 } else { 0.0 }) * g);
            }
            Ok(())
        },
    )
}

/// Zeroes every element of a contiguous output.
fn zero(w: &mut Writer<'_>, t_offset: usize, count: usize) {
    for unit in t_offset..t_offset + count {
        w.set(unit, 0.0);
    }
}

pub(crate) fn attention_backward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    params: &AttentionParams,
    grad: &Tensor,
    dq: &mut Tensor,
    dk: &mut Tensor,
    dv: &mut Tensor,
) -> Result<()> {
    let (rq, rk, rv, rg) = (
        Reader::new(q)?,
        Reader::new(k)?,
        Reader::new(v)?,
        Reader::new(grad)?,
    );
    let r = q.rank();
    let (tq, hq, d) = (q.dims()[r - 3], q.dims()[r - 2], q.dims()[r - 1]);
    let (tk, hkv, dvn) = (k.dims()[r - 3], k.dims()[r - 2], v.dims()[r - 1]);
    let group = hq / hkv;
    let (dq_off, dk_off, dv_off) = (
        dq.layout().offset(),
        dk.layout().offset(),
        dv.layout().offset(),
    );
    let (dq_n, dk_n, dv_n) = (dq.elem_count(), dk.elem_count(), dv.elem_count());
    let (mut wq, mut wk, mut wv) = (Writer::new(dq)?, Writer::new(dk)?, Writer::new(dv)?);
    zero(&mut wq, dq_off, dq_n);
    zero(&mut wk, dk_off, dk_n);
    zero(&mut wv, dv_off, dv_n);
    let (ks, vs, gs) = (
        k.layout().strides(),
        v.layout().strides(),
        grad.layout().strides(),
    );
    let q_step = q.layout().strides()[r - 1];
    let scale = params.scale as f64;
    for_each_row(q, |row, q_base, _| {
        let h = row % hq;
        let t = (row / hq) % tq;
        let lead = row / (hq * tq);
        let kvh = h / group;
        let q_pos = params.q_start + t;
        // The multi-index of this row's lead dims, for k, v and grad.
        let mut index = [0usize; MAX_RANK];
        let mut rest = lead;
        for dim in (0..r - 3).rev() {
            index[dim] = rest % q.dims()[dim];
            rest /= q.dims()[dim];
        }
        index[r - 3] = 0;
        index[r - 2] = kvh;
        let (k_lead, v_lead) = (unit_of(k, &index[..r]), unit_of(v, &index[..r]));
        index[r - 3] = t;
        index[r - 2] = h;
        let g_base = unit_of(grad, &index[..r]);
        // (capped score s, d s / d raw) for key j.
        let score = |j: usize| -> (f64, f64) {
            let kb = k_lead + j * ks[r - 3];
            let raw: f64 = (0..d)
                .map(|e| rq.get(q_base + e * q_step) * rk.get(kb + e * ks[r - 1]))
                .fold(0.0, |acc, v| acc + v)
                * scale;
            match params.softcap {
                Some(c) => {
                    let c = c as f64;
                    let s = c * (raw / c).tanh();
                    (s, 1.0 - (s / c) * (s / c))
                }
                None => (raw, 1.0),
            }
        };
        let visible = |j: usize| params.visible(q_pos, j);
        let max = (0..tk)
            .filter(|&j| visible(j))
            .map(|j| score(j).0)
            .fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = (0..tk)
            .filter(|&j| visible(j))
            .map(|j| (score(j).0 - max).exp())
            .fold(0.0, |acc, v| acc + v);
        if sum == 0.0 {
            return Ok(());
        }
        let dp = |j: usize| -> f64 {
            let vb = v_lead + j * vs[r - 3];
            (0..dvn)
                .map(|e| rg.get(g_base + e * gs[r - 1]) * rv.get(vb + e * vs[r - 1]))
                .fold(0.0, |acc, v| acc + v)
        };
        let dot_p_dp: f64 = (0..tk)
            .filter(|&j| visible(j))
            .map(|j| (score(j).0 - max).exp() / sum * dp(j))
            .fold(0.0, |acc, v| acc + v);
        let dq_row = dq_off + row * d;
        for j in (0..tk).filter(|&j| visible(j)) {
            let (s, dcap) = score(j);
            let p = (s - max).exp() / sum;
            let du = p * (dp(j) - dot_p_dp) * dcap * scale;
            // dk, dv are contiguous outputs shaped like k and v.
            let lead_units =
                |n_per_lead: usize| (lead * tk + j) * hkv * n_per_lead + kvh * n_per_lead;
            let (dk_row, dv_row) = (dk_off + lead_units(d), dv_off + lead_units(dvn));
            for e in 0..dvn {
                let old = wv.get(dv_row + e);
                wv.set(dv_row + e, old + p * rg.get(g_base + e * gs[r - 1]));
            }
            let kb = k_lead + j * ks[r - 3];
            for e in 0..d {
                let oq = wq.get(dq_row + e);
                wq.set(dq_row + e, oq + du * rk.get(kb + e * ks[r - 1]));
                let ok = wk.get(dk_row + e);
                wk.set(dk_row + e, ok + du * rq.get(q_base + e * q_step));
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use crate::reference::nn::at;
    use crate::{DType, ExecContext};

    #[test]
    fn at_reads_strided_1d() {
        let ctx = ExecContext::reference();
        let t = ctx
            .arange(0.0, 6.0, 1.0, DType::F64)
            .unwrap()
            .reshape(&[3, 2])
            .unwrap()
            .select(1, 1)
            .unwrap();
        let r = super::Reader::new(&t).unwrap();
        assert_eq!(at(&r, &t, 2), 5.0);
    }
}
