//! `Backend::linear` on the CPU: `out [.., N] = x [.., K] · wᵀ (+ bias)`.
//!
//! - Block-quantized weights, fewer than `Products::dequant_gemm_rows` rows (decode):
//!   the integer dot products of [`crate::quantized`].
//! - Block-quantized weights, more rows (prefill) with `CpuConfig::fast_prefill` only
//!   (the default keeps the integer products at every row count, row-invariant): the f32 GEMM with `B = wᵀ` dequantized
//!   block by block while it is packed (each dequantized value then serves `MC` rows);
//!   except the row-interleaved Q4_0R8, Q4KR8 and Q5KR8, whose integer products run at every
//!   row count (unpacking each weight block once per four activation rows beats
//!   dequantizing it for the f32 GEMM); Q8_0R8 and Q6KR8 are dequantized too, each block
//!   gathered from its group's record.
//! - Float weights (F32/F16/BF16) with one input row: the GEMV in [`crate::gemm::gemv`].
//! - Float weights with several rows: the f32 GEMM with `B = wᵀ`, a transposed view of
//!   the weight that the packing reads row by row.

use tempra_tensor::{Result, Tensor, TensorError};

use crate::gemm::{Gemm, MatRef, OutPtr, Values, gemv};
use crate::matmul::{batch_offset, float_values};
use crate::products::Products;
use crate::quantized;

/// Minimum weight bytes per GEMV task.
const MIN_GEMV_TASK_BYTES: usize = 64 * 1024;

/// Linear with F32 `x` and a float or block-quantized weight `w [N, K]`.
pub(crate) fn linear(
    products: &Products<'_>,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    const OP: &str = "linear";
    let (g, avx2) = (&products.gemm, products.avx2);
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let (ws0, ws1) = (w.layout().strides()[0], w.layout().strides()[1]);
    let wv = if w.dtype().is_quantized() {
        tempra_tensor::quant::check_interleaved_weight(OP, w)?;
        let rows = x.elem_count().checked_div(k).unwrap_or(0);
        // Row-interleaved layouts run their integer products at every row count, except
        // those whose dequantized GEMM is faster (`Products::integer_prefill`).
        if rows < products.dequant_gemm_rows || k == 0 || products.integer_prefill(w.dtype()) {
            return quantized::linear(g, &products.quant, x, w, bias, out);
        }
        // Many rows: dequantize the weight while packing it for the f32 GEMM (virtual
        // element indices: `w[n, k]` is element `n · ws0 · block_len + k`).
        let bl = w.dtype().block_len();
        let wv = Values::Blocks {
            dtype: w.dtype(),
            bytes: w.storage().host_bytes()?,
            base_block: w.layout().offset(),
            row_blocks: k / bl,
        };
        return gemm_rows(
            g,
            x,
            MatRef {
                values: wv,
                offset: 0,
                rs: 1,
                cs: ws0 * bl,
            },
            n,
            k,
            bias,
            out,
        );
    } else {
        float_values(OP, w)?
    };
    let rank = x.rank();
    let rows = x
        .elem_count()
        .checked_div(k)
        .unwrap_or_else(|| out.elem_count() / n.max(1));
    let xs = match float_values(OP, x)? {
        Values::F32(v) => v,
        _ => {
            return Err(TensorError::DType {
                op: OP,
                dtype: x.dtype(),
                what: "an f32 input",
            });
        }
    };
    let out_offset = out.layout().offset();
    let c = &mut out.host_slice_mut::<f32>()?[out_offset..out_offset + rows * n];
    if c.is_empty() {
        return Ok(());
    }
    let x_step = x.layout().strides()[rank - 1];
    if rows == 1 && ws1 == 1 && k > 0 {
        let start = x.layout().offset();
        let mut lease;
        let xrow: &[f32] = if x_step == 1 {
            &xs[start..start + k]
        } else {
            lease = g
                .pool
                .acquire(k * size_of::<f32>())
                .map_err(|source| TensorError::Pool { op: OP, source })?;
            let buf = &mut lease.as_mut_slice::<f32>()[..k];
            for (e, v) in buf.iter_mut().enumerate() {
                *v = xs[start + e * x_step];
            }
            buf
        };
        let w_offset = w.layout().offset();
        let row_bytes = k * w.dtype().block_bytes();
        let min_rows = MIN_GEMV_TASK_BYTES.div_ceil(row_bytes).max(1);
        let out_ptr = OutPtr::new(c, n);
        let task = |range: std::ops::Range<usize>| {
            // SAFETY: each task writes only `out[range]`; ranges are disjoint and the call
            // returns after all tasks.
            let out = unsafe { out_ptr.row_segment(0, range.clone()) };
            gemv::gemv_rows(avx2, xrow, wv, w_offset, ws0, range, out);
        };
        if g.par.threads() > 1 && n >= 2 * min_rows {
            g.par.parallel_for(n, min_rows, &task);
        } else {
            task(0..n);
        }
        return quantized::add_bias(bias, c, n);
    }
    let b = MatRef {
        values: wv,
        offset: w.layout().offset(),
        rs: ws1,
        cs: ws0,
    };
    gemm_rows(g, x, b, n, k, bias, out)
}

/// `out = x · B (+ bias)` through the f32 GEMM: A = the rows of `x` (batched over all but
/// the last leading dim), `B [K, N]` (here `wᵀ`).
fn gemm_rows(
    g: &Gemm<'_>,
    x: &Tensor,
    b: MatRef<'_>,
    n: usize,
    k: usize,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    const OP: &str = "linear";
    let rank = x.rank();
    let xs = match float_values(OP, x)? {
        Values::F32(v) => v,
        _ => {
            return Err(TensorError::DType {
                op: OP,
                dtype: x.dtype(),
                what: "an f32 input",
            });
        }
    };
    let x_step = x.layout().strides()[rank - 1];
    let rows = x
        .elem_count()
        .checked_div(k)
        .unwrap_or_else(|| out.elem_count() / n.max(1));
    let out_offset = out.layout().offset();
    let c = &mut out.host_slice_mut::<f32>()?[out_offset..out_offset + rows * n];
    if c.is_empty() {
        return Ok(());
    }
    let (m, batch_dims) = if rank >= 2 {
        (x.dims()[rank - 2], &x.dims()[..rank - 2])
    } else {
        (1, &x.dims()[..0])
    };
    let xl = x.layout();
    let rs = if rank >= 2 { xl.strides()[rank - 2] } else { 0 };
    let batch_strides = &xl.strides()[..batch_dims.len()];
    let c_ptr = OutPtr::new(c, n);
    for bi in 0..rows / m.max(1) {
        let a = MatRef {
            values: Values::F32(xs),
            offset: xl.offset() + batch_offset(bi, batch_dims, batch_strides),
            rs,
            cs: x_step,
        };
        // SAFETY: rows `bi*m .. (bi+1)*m` of the output slice `c`, held mutably here.
        unsafe { g.gemm(m, n, k, a, b, c_ptr.at(bi * m, 0))? };
    }
    quantized::add_bias(bias, c, n)
}
