//! Reference matmul and linear.

use crate::error::Result;
use crate::reference::host_access::{Reader, Writer, next_index, unit_of};
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::Tensor;

pub(crate) fn matmul(a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
    let (ra, rb) = (Reader::new(a)?, Reader::new(b)?);
    let rank = out.rank();
    let shape = *out.shape();
    let dims = shape.dims();
    let k_len = a.dims()[rank - 1];
    let offset = out.layout().offset();
    let mut w = Writer::new(out)?;
    if dims.contains(&0) {
        return Ok(());
    }
    let (sa, sb) = (a.layout().strides(), b.layout().strides());
    let mut index = [0usize; MAX_RANK];
    let mut position = 0;
    loop {
        // index = [batch.., i, j]; a at [batch.., i, 0], b at [batch.., 0, j].
        let mut ia = index;
        ia[rank - 1] = 0;
        let mut ib = index;
        ib[rank - 2] = 0;
        let (base_a, base_b) = (unit_of(a, &ia[..rank]), unit_of(b, &ib[..rank]));
        let acc: f64 = (0..k_len)
            .map(|k| ra.get(base_a + k * sa[rank - 1]) * rb.get(base_b + k * sb[rank - 2]))
            .fold(0.0, |acc, v| acc + v);
        w.set(offset + position, acc);
        position += 1;
        if !next_index(&mut index[..rank], dims) {
            return Ok(());
        }
    }
}

pub(crate) fn linear(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    let (rx, rw) = (Reader::new(x)?, Reader::new(w)?);
    let rbias = bias.map(Reader::new).transpose()?;
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let x_rank = x.rank();
    let lead_shape = Shape::new(&x.dims()[..x_rank - 1])?;
    let lead = lead_shape.dims();
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    if lead.contains(&0) || n == 0 {
        return Ok(());
    }
    let x_step = x.layout().strides()[x_rank - 1];
    let (w_row, w_col) = (w.layout().strides()[0], w.layout().strides()[1]);
    let dtype = w.dtype();
    let (bl, quantized) = (dtype.block_len(), dtype.is_quantized());
    let mut block = [0f32; 256];
    let mut index = [0usize; MAX_RANK];
    let mut row = 0;
    loop {
        let x_base = unit_of(x, &index[..x_rank]);
        for j in 0..n {
            let w_base = w.layout().offset() + j * w_row;
            let mut acc = 0f64;
            if quantized {
                for blk in 0..k / bl {
                    rw.dequantize_block(w_base + blk * w_col, &mut block[..bl])?;
                    for (e, &wv) in block[..bl].iter().enumerate() {
                        acc += rx.get(x_base + (blk * bl + e) * x_step) * wv as f64;
                    }
                }
            } else {
                for e in 0..k {
                    acc += rx.get(x_base + e * x_step) * rw.get(w_base + e * w_col);
                }
            }
            if let (Some(rb), Some(b)) = (&rbias, bias) {
                acc += rb.get(b.layout().offset() + j * b.layout().strides()[0]);
            }
            wr.set(offset + row * n + j, acc);
        }
        row += 1;
        if x_rank == 1 || !next_index(&mut index[..x_rank - 1], lead) {
            return Ok(());
        }
    }
}
