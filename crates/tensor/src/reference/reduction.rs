//! Reference reductions, argmax and softmax.

use crate::error::Result;
use crate::op_kinds::ReduceOp;
use crate::reference::host_access::{Reader, Writer, next_index, unit_of};
use crate::shape::MAX_RANK;
use crate::tensor::Tensor;

/// Calls `f(out_position, values along dim)` for every output position, where the values
/// are given as an iterator-producing closure over the reduced dim.
pub(crate) fn for_each_lane(
    x: &Tensor,
    dim: usize,
    mut f: impl FnMut(usize, &dyn Fn(usize) -> f64),
) -> Result<()> {
    let r = Reader::new(x)?;
    let dims = x.dims();
    let mut outer_dims = [1usize; MAX_RANK];
    outer_dims[..dims.len()].copy_from_slice(dims);
    outer_dims[dim] = 1;
    let outer = &outer_dims[..dims.len()];
    if outer.contains(&0) {
        return Ok(());
    }
    let mut index = [0usize; MAX_RANK];
    let mut position = 0;
    loop {
        let base = unit_of(x, &index[..dims.len()]);
        let stride = x.layout().strides()[dim];
        f(position, &|k| r.get(base + k * stride));
        position += 1;
        if !next_index(&mut index[..dims.len()], outer) {
            return Ok(());
        }
    }
}

pub(crate) fn reduce(op: ReduceOp, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
    let n = x.dims()[dim];
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for_each_lane(x, dim, |pos, get| {
        let value = match op {
            ReduceOp::Sum => (0..n).map(get).fold(0.0, |acc, v| acc + v),
            ReduceOp::Mean => (0..n).map(get).fold(0.0, |acc, v| acc + v) / n as f64,
            ReduceOp::Max => (0..n).map(get).fold(f64::NEG_INFINITY, nan_max),
            ReduceOp::Min => (0..n).map(get).fold(f64::INFINITY, |a, b| -nan_max(-a, -b)),
        };
        w.set(offset + pos, value);
    })
}

/// max that propagates NaN.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

pub(crate) fn argmax(x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
    let n = x.dims()[dim];
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for_each_lane(x, dim, |pos, get| {
        let mut best = 0;
        let mut best_value = get(0);
        for k in 1..n {
            let v = get(k);
            // The first maximum wins; a NaN counts as the maximum (as torch does).
            if !best_value.is_nan() && (v > best_value || v.is_nan()) {
                best = k;
                best_value = v;
            }
        }
        w.set(offset + pos, best as f64);
    })
}

pub(crate) fn softmax(x: &Tensor, log: bool, out: &mut Tensor) -> Result<()> {
    let dim = x.rank() - 1;
    let n = x.dims()[dim];
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    for_each_lane(x, dim, |pos, get| {
        let max = (0..n).map(get).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = (0..n)
            .map(|k| (get(k) - max).exp())
            .fold(0.0, |acc, v| acc + v);
        for k in 0..n {
            let v = get(k) - max;
            let y = if log { v - sum.ln() } else { v.exp() / sum };
            w.set(offset + pos * n + k, y);
        }
    })
}
