//! Reference `top_k`, `gather` and `weighted_sum`.

use crate::error::Result;
use crate::ordering::ranks_above;
use crate::reference::host_access::{Reader, Writer, unit_of};
use crate::reference::nn::for_each_row;
use crate::reference::reduction::for_each_lane;
use crate::shape::MAX_RANK;
use crate::tensor::Tensor;

/// Selection without a buffer: the `j`-th value is the highest-ranked one below the
/// `(j − 1)`-th (the order is strict and total, so each step has one answer).
pub(crate) fn top_k(x: &Tensor, values: &mut Tensor, indices: &mut Tensor) -> Result<()> {
    let rx = Reader::new(x)?;
    let n = x.shape().last();
    let k = values.shape().last();
    let (v_offset, i_offset) = (values.layout().offset(), indices.layout().offset());
    let mut wv = Writer::new(values)?;
    let mut wi = Writer::new(indices)?;
    if k == 0 {
        return Ok(());
    }
    for_each_row(x, |row, base, step| {
        let get = |i: usize| rx.get(base + i * step);
        let mut last: Option<(f64, usize)> = None;
        for j in 0..k {
            let mut best: Option<(f64, usize)> = None;
            for i in 0..n {
                let v = get(i);
                let below_last = last.is_none_or(|(lv, li)| ranks_above(lv, li, v, i));
                let above_best = best.is_none_or(|(bv, bi)| ranks_above(v, i, bv, bi));
                if below_last && above_best {
                    best = Some((v, i));
                }
            }
            // `k ≤ n` (the context checks), so every step finds one.
            let (v, i) = best.unwrap_or((f64::NAN, 0));
            wv.set(v_offset + row * k + j, v);
            wi.set(i_offset + row * k + j, i as f64);
            last = Some((v, i));
        }
        Ok(())
    })
}

pub(crate) fn gather(x: &Tensor, indices: &Tensor, out: &mut Tensor) -> Result<()> {
    let (rx, ri) = (Reader::new(x)?, Reader::new(indices)?);
    let r = x.rank();
    let (n, k) = (x.shape().last(), indices.shape().last());
    let x_step = x.layout().strides()[r - 1];
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    let mut index = [0usize; MAX_RANK];
    for_each_row(indices, |row, i_base, i_step| {
        // The row's multi-index (all but the last dim) in x: row-major over the leading
        // dims, which x and indices share.
        let mut rest = row;
        for d in (0..r - 1).rev() {
            index[d] = rest % x.dims()[d];
            rest /= x.dims()[d];
        }
        index[r - 1] = 0;
        let x_base = unit_of(x, &index[..r]);
        for j in 0..k {
            let i = ri.get(i_base + j * i_step) as usize;
            let v = if i < n {
                rx.get(x_base + i * x_step)
            } else {
                f64::NAN
            };
            w.set(offset + row * k + j, v);
        }
        Ok(())
    })
}

pub(crate) fn weighted_sum(x: &Tensor, weights: &Tensor, out: &mut Tensor) -> Result<()> {
    let rx = Reader::new(x)?;
    let r = x.rank();
    let (slots, d) = (x.dims()[r - 2], x.dims()[r - 1]);
    let (slot_stride, x_step) = (x.layout().strides()[r - 2], x.layout().strides()[r - 1]);
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    let mut index = [0usize; MAX_RANK];
    // Each lane of `weights` along its last dim is one output row.
    for_each_lane(weights, r - 2, |row, weight| {
        let mut rest = row;
        for dim in (0..r - 2).rev() {
            index[dim] = rest % x.dims()[dim];
            rest /= x.dims()[dim];
        }
        index[r - 2] = 0;
        index[r - 1] = 0;
        let x_base = unit_of(x, &index[..r]);
        for e in 0..d {
            let sum = (0..slots)
                .map(|s| weight(s) * rx.get(x_base + s * slot_stride + e * x_step))
                .fold(0.0, |acc, v| acc + v);
            w.set(offset + row * d + e, sum);
        }
    })
}
