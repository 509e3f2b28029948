//! `linear` with block-quantized weights (the legacy, K, I-quant and ternary formats):
//! activations quantized once per row to the weight format's partner (Q8_0, Q8_1 or
//! Q8_K, see [`tempra_tensor::quant::vec_dot_dtype`]), then integer dot products.
//!
//! - One row (decode, GEMV): the row is quantized once and shared; tasks split the
//!   weight rows, so the weights are read exactly once, in order.
//! - Row-interleaved weights ([`crate::interleaved::InterleavedWeight`]: Q4_0, Q8_0,
//!   Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0 made at load by [`crate::prepare`]),
//!   at every row count this
//!   module is given (with a fast prefill, Q8_0 and Q6_K only below
//!   `Products::dequant_gemm_rows`): tasks split
//!   the groups of eight rows; each group is one sequential stream that one kernel call
//!   turns into eight outputs for each of up to four input rows (eight for the 512-bit
//!   IQ4 products: the kernel's `GroupKernel::rows`).
//! - Many rows (prefill, GEMM): every row is quantized once; tasks split the weight rows;
//!   within a task, blocks of weight rows meet blocks of activation rows that fit in L2,
//!   and each weight row is unpacked once per group of [`ROWS_PER_DOT`] activation rows.
//!
//! Scratch: one pool lease per call holding the quantized activation rows
//! (`rows × K / block_len` activation blocks), for interleaved weights each block's
//! scale and sum (8 bytes per block), and for a strided input one row of K f32s to
//! gather it into before quantizing.

mod acts;
mod kernels;
#[cfg(test)]
mod probe;
mod sweep;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

use tempra_tensor::quant::vec_dot_dtype;
use tempra_tensor::{Result, Tensor, TensorError};

pub(crate) use acts::QuantizedActs;
pub(crate) use kernels::{QuantKernels, SCALAR, for_level};
pub(crate) use sweep::{Outputs, RowMap, sweep_groups, sweep_rows};

#[cfg(test)]
use acts::q8_0_block_stats;

use crate::gemm::Gemm;
use crate::interleaved::InterleavedWeight;
use crate::parallel::DisjointWrites;

/// Activation rows one dot-product call reads against one weight row (the GEMM tile).
pub(crate) const ROWS_PER_DOT: usize = 4;

/// Minimum weight bytes per task when splitting over threads (divided by the rows each
/// weight byte meets, up to eight).
pub(crate) const MIN_TASK_BYTES: usize = 64 * 1024;

/// `out [.., N] = x [.., K] · wᵀ (+ bias)` for block-quantized `w [N, K]` and F32 `x`.
pub(crate) fn linear(
    g: &Gemm<'_>,
    kernels: &QuantKernels,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    out: &mut Tensor,
) -> Result<()> {
    const OP: &str = "linear";
    let wd = w.dtype();
    let act = vec_dot_dtype(wd);
    let dot = kernels.dot(wd).ok_or(TensorError::DType {
        op: OP,
        dtype: wd,
        what: "a weight block format",
    })?;
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let blocks = k / wd.block_len();
    let w_bytes_per_block = wd.block_bytes();
    // Row-interleaved weights: eight rows per kernel call (each group one stream), the
    // bytes from the view's first group on; row-major ones from its first block on.
    let (eight, w_bytes) = match InterleavedWeight::of(w) {
        Some(prepared) => (
            Some((kernels.gemm_r8(prepared.layout()), prepared.layout())),
            prepared.groups_of(OP, w)?,
        ),
        None => (
            None,
            &w.storage().host_bytes()?[w.layout().offset() * w_bytes_per_block..],
        ),
    };
    let w_row_stride = w.layout().strides()[0] * w_bytes_per_block;
    let rows = x.elem_count() / k.max(1);
    let out_offset = out.layout().offset();
    let out_slice = &mut out.host_slice_mut::<f32>()?[out_offset..out_offset + rows * n];
    if rows == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        out_slice.fill(0.0);
        return add_bias(bias, out_slice, n);
    }
    // Every activation row quantized once (with the Q8_0 kernels' per-block scales and
    // sums for interleaved weights: Q8_K blocks carry their own).
    let acts = QuantizedActs::new(g, kernels, OP, act, x, eight.is_some())?;
    let map = RowMap::Identity(rows);
    let outputs = Outputs {
        ptr: DisjointWrites::new(out_slice),
        n,
    };
    let w_row_bytes = blocks * w_bytes_per_block;
    // Every weight row (or group) must lie inside the storage: the kernels read raw
    // pointers.
    let w_end = match eight {
        Some((_, layout)) => n / 8 * blocks * layout.record_bytes(),
        None => (n - 1) * w_row_stride + w_row_bytes,
    };
    if w_end > w_bytes.len() {
        return Err(TensorError::Argument {
            op: OP,
            name: "w",
            reason: "rows run past the storage".into(),
        });
    }
    let threads = g.par.threads();
    // Tasks split the weight rows (or groups): each is read once, in order.
    let (units, unit_bytes) = match eight {
        Some((_, layout)) => (n / 8, blocks * layout.record_bytes()),
        None => (n, w_row_bytes),
    };
    let task = |range: std::ops::Range<usize>| match eight {
        // SAFETY: the kernel was chosen for this CPU and the weight's layout; the groups
        // lie inside `w_bytes` (checked above); `acts` holds every row, with the Q8_0
        // stats the layout needs; this task alone writes the columns of its groups.
        Some((eight, _)) => unsafe {
            sweep_groups(eight, w_bytes, unit_bytes, range, &acts, map, outputs)
        },
        // SAFETY: as above for the row-major kernel and this task's weight rows.
        None => unsafe {
            sweep_rows(
                dot,
                w_bytes,
                w_row_stride,
                w_row_bytes,
                range,
                &acts,
                map,
                outputs,
            )
        },
    };
    let min_units = MIN_TASK_BYTES.div_ceil(unit_bytes * rows.min(8)).max(1);
    if threads > 1 && units >= 2 * min_units {
        g.par.parallel_for(units, min_units, &task);
    } else if units > 0 {
        task(0..units);
    }
    drop(acts);
    add_bias(bias, out_slice, n)
}

/// Adds `bias [N]` (F32, any stride) to every `n`-wide row of `out`.
pub(crate) fn add_bias(bias: Option<&Tensor>, out: &mut [f32], n: usize) -> Result<()> {
    let Some(bias) = bias else { return Ok(()) };
    let values = bias.host_slice::<f32>()?;
    let (offset, stride) = (bias.layout().offset(), bias.layout().strides()[0]);
    if stride == 1 {
        let b = &values[offset..offset + n];
        for row in out.chunks_exact_mut(n) {
            row.iter_mut().zip(b).for_each(|(o, &v)| *o += v);
        }
    } else {
        for row in out.chunks_exact_mut(n) {
            for (j, o) in row.iter_mut().enumerate() {
                *o += values[offset + j * stride];
            }
        }
    }
    Ok(())
}
