//! `linear` with block-quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K):
//! activations quantized once per row to the weight format's partner (Q8_0, Q8_1 or
//! Q8_K, see [`tempra_tensor::quant::vec_dot_dtype`]), then integer dot products.
//!
//! - One row (decode, GEMV): the row is quantized once and shared; tasks split the
//!   weight rows, so the weights are read exactly once, in order.
//! - Row-interleaved weights ([`tempra_tensor::DType::Q4_0R8`], `Q8_0R8`, `Q4KR8`,
//!   `Q5KR8`, `Q6KR8`, made at load by [`crate::prepare`]), at every row count this
//!   module is given (with a fast prefill, Q8_0R8 and Q6KR8 only below
//!   `Products::dequant_gemm_rows`): tasks split
//!   the groups of eight rows; each group is one sequential stream that one kernel call
//!   turns into eight outputs for each of up to four input rows.
//! - Many rows (prefill, GEMM): every row is quantized once; tasks split the weight rows;
//!   within a task, blocks of weight rows meet blocks of activation rows that fit in L2,
//!   and each weight row is unpacked once per group of [`ROWS_PER_DOT`] activation rows.
//!
//! Scratch: one pool lease per call holding the quantized activation rows
//! (`rows × K / block_len` activation blocks), for interleaved weights each block's
//! scale and sum (8 bytes per block), and for a strided input one row of K f32s to
//! gather it into before quantizing.

mod kernels;
#[cfg(test)]
mod probe;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

use tempra_tensor::quant::vec_dot_dtype;
use tempra_tensor::{DType, Result, Tensor, TensorError};

pub(crate) use kernels::{QuantKernels, SCALAR, avx2_kernels, vnni_kernels};

use kernels::ActRow;

use crate::gemm::Gemm;
use crate::parallel::DisjointWrites;

/// Activation rows one dot-product call reads against one weight row (the GEMM tile).
pub(crate) const ROWS_PER_DOT: usize = 4;

/// Weight rows a task handles per sweep over an activation block.
const WEIGHT_ROWS_PER_BLOCK: usize = 32;

/// Activation bytes kept hot (in L2) while a block of weight rows sweeps over them.
const ACT_BLOCK_BYTES: usize = 192 * 1024;

/// Minimum weight bytes per task when splitting over threads.
const MIN_TASK_BYTES: usize = 64 * 1024;

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
    // Row-interleaved weights: eight rows per kernel call (each group one stream).
    let eight = if wd.row_group() > 1 {
        kernels.gemm_r8(wd)
    } else {
        None
    };
    let dot = kernels.dot(wd.base_format()).ok_or(TensorError::DType {
        op: OP,
        dtype: wd,
        what: "a weight block format",
    })?;
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let blocks = k / wd.block_len();
    let (w_bytes_per_block, a_bytes_per_block) = (wd.block_bytes(), act.block_bytes());
    let w_row_stride = w.layout().strides()[0] * w_bytes_per_block;
    let w_bytes = &w.storage().host_bytes()?[w.layout().offset() * w_bytes_per_block..];
    let x_rank = x.rank();
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
    // Quantize every activation row once into the scratch lease, laid out as
    // [per-block scales and sums (eight-row GEMV only) | one gathered f32 row (strided
    // input only) | quantized rows], so the f32/i32 parts stay 4-byte aligned.
    let act_row_bytes = blocks * a_bytes_per_block;
    let x_step = x.layout().strides()[x_rank - 1];
    // Per-block scales and sums: the Q8_0 kernels take them precomputed (Q8_K blocks
    // carry their own).
    let stat_bytes = if eight.is_some() && act == DType::Q8_0 {
        rows * blocks * 8
    } else {
        0
    };
    let gather = if x_step == 1 { 0 } else { k * size_of::<f32>() };
    let mut lease = g
        .pool
        .acquire(stat_bytes + gather + rows * act_row_bytes)
        .map_err(|source| TensorError::Pool { op: OP, source })?;
    let (stats, rest) = lease.as_bytes_mut().split_at_mut(stat_bytes);
    let (gather_buf, rest) = rest.split_at_mut(gather);
    let acts = &mut rest[..rows * act_row_bytes];
    let xs = x.host_slice::<f32>()?;
    let lead = &x.dims()[..x_rank - 1];
    let lead_strides = &x.layout().strides()[..x_rank - 1];
    for (r, act_row) in acts.chunks_exact_mut(act_row_bytes).enumerate() {
        let start = x.layout().offset() + crate::matmul::batch_offset(r, lead, lead_strides);
        if x_step == 1 {
            (kernels.quantize)(act, &xs[start..start + k], act_row)?;
        } else {
            let buf: &mut [f32] = bytemuck::cast_slice_mut(gather_buf);
            for (e, v) in buf.iter_mut().enumerate() {
                *v = xs[start + e * x_step];
            }
            (kernels.quantize)(act, buf, act_row)?;
        }
    }
    let (scales, sums) = stats.split_at_mut(stat_bytes / 2);
    let (scales, sums): (&mut [f32], &mut [i32]) = (
        bytemuck::cast_slice_mut(scales),
        bytemuck::cast_slice_mut(sums),
    );
    if stat_bytes > 0 {
        q8_0_block_stats(acts, scales, sums);
    }
    let acts: &[u8] = acts;
    let out_ptr = DisjointWrites::new(out_slice);
    let w_row_bytes = blocks * w_bytes_per_block;
    // Every weight row must lie inside the storage: the kernels read raw pointers.
    if (n - 1) * w_row_stride + w_row_bytes > w_bytes.len() {
        return Err(TensorError::Argument {
            op: OP,
            name: "w",
            reason: "rows run past the storage".into(),
        });
    }
    if let Some(eight) = eight {
        let (scales, sums): (&[f32], &[i32]) = (scales, sums);
        let acts = ActRows {
            acts,
            scales,
            sums,
            row_bytes: act_row_bytes,
            blocks,
        };
        let groups = n / 8;
        let act_rows_per_block =
            (ACT_BLOCK_BYTES / act_row_bytes).max(ROWS_PER_DOT) / ROWS_PER_DOT * ROWS_PER_DOT;
        let task8 = |range: std::ops::Range<usize>| {
            let mut dots = [[0f32; 8]; ROWS_PER_DOT];
            let mut tile = [acts.row(0); ROWS_PER_DOT];
            // Activation rows in blocks that stay in L2 while the task's groups sweep
            // over them; each weight block is unpacked once per tile of 4 rows.
            for r0 in (0..rows).step_by(act_rows_per_block) {
                let r1 = (r0 + act_rows_per_block).min(rows);
                for group in range.clone() {
                    let j = group * 8;
                    // An interleaved group is the same bytes as its eight rows (the
                    // layout is contiguous whole groups, checked by `linear`).
                    let w_group = w_bytes[j * w_row_stride..].as_ptr();
                    for t in (r0..r1).step_by(ROWS_PER_DOT) {
                        let count = (r1 - t).min(ROWS_PER_DOT);
                        for (i, row) in tile[..count].iter_mut().enumerate() {
                            *row = acts.row(t + i);
                        }
                        // SAFETY: the kernel was chosen for this CPU's features; the
                        // group's `blocks` records lie inside the weight storage (checked
                        // above) and each tile row holds `blocks` activation blocks of
                        // `act` (Q8_0 rows with their `blocks` scales and sums from
                        // `stats`; Q8_K rows, whose unread scales and sums are null or
                        // dangling), as the `GemmR8Fn` contract asks for `wd`.
                        unsafe { eight(blocks, w_group, &tile[..count], &mut dots[..count]) };
                        for (i, row) in dots[..count].iter().enumerate() {
                            // SAFETY: elements (t + i, j..j + 8) of the `rows × n` output
                            // (`j + 8 <= n`: whole groups); columns `j..j + 8` belong to
                            // this task alone, and `dots` is a separate local array.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    row.as_ptr(),
                                    out_ptr.ptr().add((t + i) * n + j),
                                    8,
                                )
                            };
                        }
                    }
                }
            }
        };
        let threads = g.par.threads();
        let min_groups = MIN_TASK_BYTES
            .div_ceil(8 * w_row_bytes * rows.min(8))
            .max(1);
        if threads > 1 && groups >= 2 * min_groups {
            g.par.parallel_for(groups, min_groups, &task8);
        } else if groups > 0 {
            task8(0..groups);
        }
        drop(lease);
        return add_bias(bias, out_slice, n);
    }
    let act_rows_per_block =
        (ACT_BLOCK_BYTES / act_row_bytes).max(ROWS_PER_DOT) / ROWS_PER_DOT * ROWS_PER_DOT;
    let task = |wrows: std::ops::Range<usize>| {
        let mut dots = [0f32; ROWS_PER_DOT];
        for r0 in (0..rows).step_by(act_rows_per_block) {
            let r1 = (r0 + act_rows_per_block).min(rows);
            for j0 in (wrows.start..wrows.end).step_by(WEIGHT_ROWS_PER_BLOCK) {
                for j in j0..(j0 + WEIGHT_ROWS_PER_BLOCK).min(wrows.end) {
                    let w_row = &w_bytes[j * w_row_stride..j * w_row_stride + w_row_bytes];
                    for t in (r0..r1).step_by(ROWS_PER_DOT) {
                        let count = (r1 - t).min(ROWS_PER_DOT);
                        let mut ptrs = [std::ptr::null::<u8>(); ROWS_PER_DOT];
                        for (i, p) in ptrs[..count].iter_mut().enumerate() {
                            *p =
                                acts[(t + i) * act_row_bytes..(t + i + 1) * act_row_bytes].as_ptr();
                        }
                        // SAFETY: `dot` was chosen for this CPU's features; `w_row` holds
                        // `blocks` weight blocks and each pointer `blocks` activation
                        // blocks of the partner format (checked slices above).
                        unsafe { dot(blocks, w_row.as_ptr(), &ptrs[..count], &mut dots[..count]) };
                        for (i, &v) in dots[..count].iter().enumerate() {
                            // SAFETY: element (t + i, j) of the `rows × n` output; column
                            // `j` belongs to this task alone.
                            unsafe { *out_ptr.ptr().add((t + i) * n + j) = v };
                        }
                    }
                }
            }
        }
    };
    let threads = g.par.threads();
    let min_rows = MIN_TASK_BYTES.div_ceil(w_row_bytes * rows.min(8)).max(1);
    if threads > 1 && n >= 2 * min_rows {
        g.par.parallel_for(n, min_rows, &task);
    } else {
        task(0..n);
    }
    drop(lease);
    add_bias(bias, out_slice, n)
}

/// Quantized activation rows with, for Q8_0, their per-block scales and sums (empty for
/// Q8_K, whose blocks carry them: the rows' pointers are then null).
struct ActRows<'a> {
    acts: &'a [u8],
    scales: &'a [f32],
    sums: &'a [i32],
    row_bytes: usize,
    blocks: usize,
}

impl ActRows<'_> {
    /// Row `t` for a GEMV kernel.
    fn row(&self, t: usize) -> ActRow {
        ActRow {
            blocks: self.acts[t * self.row_bytes..].as_ptr(),
            scales: self
                .scales
                .get(t * self.blocks..)
                .map_or(std::ptr::null(), <[f32]>::as_ptr),
            sums: self
                .sums
                .get(t * self.blocks..)
                .map_or(std::ptr::null(), <[i32]>::as_ptr),
        }
    }
}

/// Each Q8_0 block's scale (f32) and `Σ qs` (i32), for every block of `acts`.
fn q8_0_block_stats(acts: &[u8], scales: &mut [f32], sums: &mut [i32]) {
    for ((block, scale), sum) in acts.chunks_exact(34).zip(scales).zip(sums) {
        *scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        *sum = block[2..].iter().map(|&q| q as i8 as i32).sum();
    }
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
