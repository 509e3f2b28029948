//! Reference elementwise kernels.

use crate::error::Result;
use crate::layout::StridedIndex;
use crate::op_kinds::{BinaryOp, UnaryOp};
use crate::reference::host_access::{Reader, Writer};
use crate::tensor::Tensor;

pub(crate) fn unary(op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<()> {
    let r = Reader::new(x)?;
    let out_layout = *out.layout();
    let mut w = Writer::new(out)?;
    for (s, d) in StridedIndex::new(x.layout()).zip(StridedIndex::new(&out_layout)) {
        w.set(d, op.apply(r.get(s)));
    }
    Ok(())
}

pub(crate) fn binary(op: BinaryOp, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<()> {
    let (ra, rb) = (Reader::new(lhs)?, Reader::new(rhs)?);
    let out_layout = *out.layout();
    let mut w = Writer::new(out)?;
    let pairs = StridedIndex::new(lhs.layout()).zip(StridedIndex::new(rhs.layout()));
    for ((a, b), d) in pairs.zip(StridedIndex::new(&out_layout)) {
        w.set(d, op.apply(ra.get(a), rb.get(b)));
    }
    Ok(())
}

pub(crate) fn binary_inplace(op: BinaryOp, lhs_out: &mut Tensor, rhs: &Tensor) -> Result<()> {
    let rb = Reader::new(rhs)?;
    let layout = *lhs_out.layout();
    let mut w = Writer::new(lhs_out)?;
    for (d, b) in StridedIndex::new(&layout).zip(StridedIndex::new(rhs.layout())) {
        // Read the old value through the writer's own bytes: the output is the input.
        let old = w.get(d);
        w.set(d, op.apply(old, rb.get(b)));
    }
    Ok(())
}

pub(crate) fn binary_scalar(op: BinaryOp, x: &Tensor, scalar: f64, out: &mut Tensor) -> Result<()> {
    let r = Reader::new(x)?;
    let out_layout = *out.layout();
    let mut w = Writer::new(out)?;
    for (s, d) in StridedIndex::new(x.layout()).zip(StridedIndex::new(&out_layout)) {
        w.set(d, op.apply(r.get(s), scalar));
    }
    Ok(())
}
