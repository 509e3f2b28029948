//! Reference `expert_linear`: each `(token, slot)` row through its expert's weights,
//! dequantized one block at a time, accumulated in f64.

use crate::error::{Result, TensorError};
use crate::reference::host_access::{Reader, Writer};
use crate::tensor::Tensor;

pub(crate) fn expert_linear(
    x: &Tensor,
    w: &Tensor,
    ids: &Tensor,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    let (rx, rw, ri) = (Reader::new(x)?, Reader::new(w)?, Reader::new(ids)?);
    let rbias = bias.map(Reader::new).transpose()?;
    let (experts, n, k) = (w.dims()[0], w.dims()[1], w.dims()[2]);
    let (tokens, slots) = (ids.dims()[0], ids.dims()[1]);
    let (xs, ws, is) = (
        x.layout().strides(),
        w.layout().strides(),
        ids.layout().strides(),
    );
    let dtype = w.dtype();
    let (bl, quantized) = (dtype.block_len(), dtype.is_quantized());
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    let mut block = [0f32; 256];
    for t in 0..tokens {
        for s in 0..slots {
            let e = ri.get(ids.layout().offset() + t * is[0] + s * is[1]) as usize;
            if e >= experts {
                return Err(TensorError::Argument {
                    op: "expert_linear",
                    name: "ids",
                    reason: format!(
                        "expert {e} of token {t}, slot {s} is out of range for {experts} experts"
                    ),
                });
            }
            let x_base = x.layout().offset() + t * xs[0] + s * xs[1];
            let row = t * slots + s;
            for j in 0..n {
                let w_base = w.layout().offset() + e * ws[0] + j * ws[1];
                let mut acc = 0f64;
                if quantized {
                    for blk in 0..k / bl {
                        rw.dequantize_block(w_base + blk * ws[2], &mut block[..bl])?;
                        for (i, &wv) in block[..bl].iter().enumerate() {
                            acc += rx.get(x_base + (blk * bl + i) * xs[2]) * wv as f64;
                        }
                    }
                } else {
                    for i in 0..k {
                        acc += rx.get(x_base + i * xs[2]) * rw.get(w_base + i * ws[2]);
                    }
                }
                if let (Some(rb), Some(b)) = (&rbias, bias) {
                    let bs = b.layout().strides();
                    acc += rb.get(b.layout().offset() + e * bs[0] + j * bs[1]);
                }
                wr.set(offset + row * n + j, acc);
            }
        }
    }
    Ok(())
}
