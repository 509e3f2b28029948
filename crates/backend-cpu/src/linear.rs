//! `Backend::linear` on the CPU: `out [.., N] = x [.., K] · wᵀ (+ bias)`.
//!
//! - Block-quantized weights, fewer than `Products::dequant_gemm_rows` rows (decode):
//!   the integer dot products of [`crate::quantized`].
//! - Block-quantized weights, more rows (prefill) with `CpuConfig::fast_prefill` only
//!   (the default keeps the integer products at every row count, row-invariant): the f32 GEMM with `B = wᵀ` dequantized
//!   block by block while it is packed (each dequantized value then serves `MC` rows);
//!   except prepared (row-interleaved) Q4_0, Q4_K and Q5_K, whose integer products run at every
//!   row count (unpacking each weight block once per four activation rows beats
//!   dequantizing it for the f32 GEMM); prepared Q8_0 and Q6_K are dequantized too, each block
//!   gathered from its group's record.
//! - Float weights (F32/F16/BF16) contiguous along `K`: the dot products of
//!   [`crate::gemm::dot_rows`] at every row count (one arithmetic for decode and
//!   prefill); with `CpuConfig::fast_prefill`, from two rows on, the f32 GEMM with
//!   `B = wᵀ`, a transposed view of the weight that the packing reads row by row.
//! - Float weights with another column stride: the f32 GEMM at every row count.

use tempra_tensor::{Result, Tensor, TensorError};

use crate::gemm::dot_rows::{self, InputRows, WeightRows};
use crate::gemm::{Gemm, MatRef, OutPtr, Values};
use crate::interleaved::InterleavedWeight;
use crate::matmul::{batch_offset, float_values};
use crate::parallel::TaskErrors;
use crate::products::Products;
use crate::quantized;
use crate::task_scratch::{self, TaskScratch};

/// Minimum weight bytes per dot-form task.
const MIN_DOT_TASK_BYTES: usize = 64 * 1024;

/// Minimum multiply-adds per dot-form task. Low enough that a decode row's small f32
/// product (a mixture of experts' router, `[64, 1024]`) splits over the workers rather
/// than holding the others idle; prefill rows meet it within a few columns.
const MIN_DOT_TASK_MACS: usize = 1 << 15;

/// Linear with F32 `x` and a float or block-quantized weight `w [N, K]`.
pub(crate) fn linear(
    products: &Products<'_>,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    const OP: &str = "linear";
    let g = &products.gemm;
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let (ws0, ws1) = (w.layout().strides()[0], w.layout().strides()[1]);
    let wv = if w.dtype().is_quantized() {
        let prepared = InterleavedWeight::of(w);
        let rows = x.elem_count().checked_div(k).unwrap_or(0);
        // Row-interleaved layouts run their integer products at every row count, except
        // those whose dequantized GEMM is faster (`Products::integer_prefill`).
        let integer = prepared.is_some_and(|p| products.integer_prefill(p.layout()));
        if rows < products.dequant_gemm_rows || k == 0 || integer {
            return quantized::linear(g, &products.quant, x, w, bias, out);
        }
        // Many rows: dequantize the weight while packing it for the f32 GEMM (virtual
        // element indices: `w[n, k]` is element `n · ws0 · block_len + k`).
        let bl = w.dtype().block_len();
        let wv = match prepared {
            Some(p) => Values::Blocks {
                dtype: w.dtype(),
                bytes: p.groups_of(OP, w)?,
                base_block: 0,
                row_blocks: k / bl,
                interleaved: Some(p.layout()),
            },
            None => Values::Blocks {
                dtype: w.dtype(),
                bytes: w.storage().host_bytes()?,
                base_block: w.layout().offset(),
                row_blocks: k / bl,
                interleaved: None,
            },
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
    let rows = x
        .elem_count()
        .checked_div(k)
        .unwrap_or_else(|| out.elem_count() / n.max(1));
    if ws1 == 1 && k > 0 && rows < products.float_gemm_rows {
        return dot_form(
            products,
            x,
            wv,
            w.layout().offset(),
            ws0,
            n,
            k,
            rows,
            bias,
            out,
        );
    }
    let b = MatRef {
        values: wv,
        offset: w.layout().offset(),
        rs: ws1,
        cs: ws0,
    };
    gemm_rows(g, x, b, n, k, bias, out)
}

/// Float weights with unit column stride at any row count: the dot products of
/// [`crate::gemm::dot_rows`], one arithmetic per output whatever the row count. Tasks
/// split the weight rows (each streamed once per block of input rows, in order), at least
/// [`MIN_DOT_TASK_BYTES`] of weights and [`MIN_DOT_TASK_MACS`] multiply-adds per task.
#[allow(clippy::too_many_arguments)]
fn dot_form(
    products: &Products<'_>,
    x: &Tensor,
    wv: Values<'_>,
    w_offset: usize,
    w_row_stride: usize,
    n: usize,
    k: usize,
    rows: usize,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    const OP: &str = "linear";
    let g = &products.gemm;
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
    // The input rows one after the other: a contiguous input as it is, any other view
    // gathered once into a pool lease.
    let mut gathered;
    let xrows: &[f32] = if x.layout().is_contiguous() {
        let start = x.layout().offset();
        &xs[start..start + rows * k]
    } else {
        gathered = g
            .pool
            .acquire(rows * k * size_of::<f32>())
            .map_err(|source| TensorError::Pool { op: OP, source })?;
        let buf = &mut gathered.as_mut_slice::<f32>()[..rows * k];
        gather_rows(x, xs, k, buf);
        buf
    };
    let input = InputRows { x: xrows, k };
    let weights = WeightRows {
        values: wv,
        offset: w_offset,
        row_stride: w_row_stride,
    };
    let row_bytes = k * size_of_value(wv);
    let min_cols = MIN_DOT_TASK_BYTES
        .div_ceil(row_bytes)
        .max(MIN_DOT_TASK_MACS.div_ceil(rows * k))
        .max(1);
    let floats = dot_rows::scratch_floats(rows);
    let slots = task_scratch::max_tasks(g.par.threads(), n, min_cols);
    let scratch = TaskScratch::new(g.pool, OP, slots, floats.max(1))?;
    let out_ptr = OutPtr::new(c, n);
    let level = products.level;
    let errors = TaskErrors::default();
    let task = |cols: std::ops::Range<usize>| {
        errors.record(scratch.with(|buf| {
            // SAFETY: each task writes only the columns `cols` of the `rows × n` output;
            // ranges are disjoint and the call returns after all tasks; `input` holds
            // `rows` rows.
            unsafe { dot_rows::linear_rows(level, input, rows, weights, cols, buf, out_ptr) };
            Ok(())
        }));
    };
    if g.par.threads() > 1 && n >= 2 * min_cols {
        g.par.parallel_for(n, min_cols, &task);
    } else {
        task(0..n);
    }
    errors.finish()?;
    quantized::add_bias(bias, c, n)
}

/// Bytes per weight value.
fn size_of_value(v: Values<'_>) -> usize {
    match v {
        Values::F32(_) => 4,
        Values::F16(_) | Values::BF16(_) => 2,
        Values::Blocks { .. } => 1,
    }
}

/// Copies the rows of the view `x` (last dim `k`, any strides) one after the other into
/// `dst`.
fn gather_rows(x: &Tensor, xs: &[f32], k: usize, dst: &mut [f32]) {
    let rank = x.rank();
    let l = x.layout();
    let (m, batch_dims) = if rank >= 2 {
        (x.dims()[rank - 2], &x.dims()[..rank - 2])
    } else {
        (1, &x.dims()[..0])
    };
    let rs = if rank >= 2 { l.strides()[rank - 2] } else { 0 };
    let step = l.strides()[rank - 1];
    for (r, row) in dst.chunks_exact_mut(k).enumerate() {
        let (bi, i) = (r / m.max(1), r % m.max(1));
        let start =
            l.offset() + batch_offset(bi, batch_dims, &l.strides()[..batch_dims.len()]) + i * rs;
        for (e, v) in row.iter_mut().enumerate() {
            *v = xs[start + e * step];
        }
    }
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
