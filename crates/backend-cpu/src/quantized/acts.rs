//! The activation side of a quantized product: each input row quantized once, into one
//! pool lease, to the weight format's partner (Q8_0, Q8_1 or Q8_K), with each Q8_0
//! block's scale and sum for the eight-row kernels (written by the quantizer beside the
//! block). Parts of rows go to the threads once there is enough work: on the caller's
//! thread alone, quantizing a small step's activations kept the other threads waiting.

use std::ops::Range;

use tempra_pool::HostLease;
use tempra_tensor::{DType, Result, Tensor, TensorError};

use super::kernels::{ActRow, BlockStats, QuantKernels};
use crate::gemm::Gemm;
use crate::parallel::{DisjointWrites, TaskErrors};

/// Values one quantizing unit covers (a part of a row, in whole blocks).
const UNIT_VALUES: usize = 1024;
/// Values per task below which quantizing stays on one thread.
const MIN_TASK_VALUES: usize = 1 << 13;

/// The quantized rows of one product call, in one pool lease laid out as
/// `[per-block scales and sums (Q8_0 rows for the eight-row kernels only) | one gathered
/// f32 row (a strided input only) | quantized rows]`, so the f32/i32 parts stay 4-byte
/// aligned.
pub(crate) struct QuantizedActs {
    lease: HostLease,
    /// Bytes of the scales and sums (half each).
    stat_bytes: usize,
    /// Bytes of the gathered row.
    gather_bytes: usize,
    /// Bytes of one quantized row.
    pub(crate) row_bytes: usize,
    /// Activation blocks per row.
    pub(crate) blocks: usize,
    /// Rows quantized.
    pub(crate) rows: usize,
}

impl QuantizedActs {
    /// Quantizes every row of `x` (F32, last dim `k` a whole number of `act` blocks, any
    /// strides) to `act`, in row-major order of `x`'s leading dims; with `stats`, also
    /// each Q8_0 block's scale and `Σ qs`.
    pub(crate) fn new(
        g: &Gemm<'_>,
        kernels: &QuantKernels,
        op: &'static str,
        act: DType,
        x: &Tensor,
        stats: bool,
    ) -> Result<Self> {
        let rank = x.rank();
        let k = x.shape().last();
        let rows = x.elem_count().checked_div(k).unwrap_or(0);
        let blocks = k / act.block_len();
        let row_bytes = blocks * act.block_bytes();
        let x_step = x.layout().strides()[rank - 1];
        let stat_bytes = if stats && act == DType::Q8_0 {
            rows * blocks * 8
        } else {
            0
        };
        let gather_bytes = if x_step == 1 { 0 } else { k * size_of::<f32>() };
        let lease = g
            .pool
            .acquire(stat_bytes + gather_bytes + rows * row_bytes)
            .map_err(|source| TensorError::Pool { op, source })?;
        let mut acts = QuantizedActs {
            lease,
            stat_bytes,
            gather_bytes,
            row_bytes,
            blocks,
            rows,
        };
        if rows == 0 || k == 0 {
            return Ok(acts);
        }
        if !k.is_multiple_of(act.block_len()) {
            return Err(TensorError::Argument {
                op,
                name: "x",
                reason: format!("rows of {k} values are not whole {act} blocks"),
            });
        }
        let xs = x.host_slice::<f32>()?;
        let lead = &x.dims()[..rank - 1];
        let lead_strides = &x.layout().strides()[..rank - 1];
        let offset = x.layout().offset();
        let row_start = |r: usize| offset + crate::matmul::batch_offset(r, lead, lead_strides);
        let all = acts.lease.as_bytes_mut();
        let (stat_part, rest) = all.split_at_mut(stat_bytes);
        let (gather_buf, rest) = rest.split_at_mut(gather_bytes);
        let quantized = &mut rest[..rows * row_bytes];
        let (scales, sums) = stat_part.split_at_mut(stat_bytes / 2);
        let scales: &mut [f32] = bytemuck::cast_slice_mut(scales);
        let sums: &mut [i32] = bytemuck::cast_slice_mut(sums);
        let block_len = act.block_len();
        let bb = act.block_bytes();
        if x_step != 1 {
            // A strided row goes through the one gather buffer: row by row.
            let buf: &mut [f32] = bytemuck::cast_slice_mut(gather_buf);
            for (r, act_row) in quantized.chunks_exact_mut(row_bytes).enumerate() {
                let start = row_start(r);
                for (e, v) in buf.iter_mut().enumerate() {
                    *v = xs[start + e * x_step];
                }
                let stats = (stat_bytes > 0).then(|| BlockStats {
                    scales: &mut scales[r * blocks..(r + 1) * blocks],
                    sums: &mut sums[r * blocks..(r + 1) * blocks],
                });
                (kernels.quantize)(act, buf, act_row, stats)?;
            }
            return Ok(acts);
        }
        // Units of up to `UNIT_VALUES` values of one row, split between the threads once
        // there is enough work: each block is quantized alone, so the split never shows.
        let unit_blocks = (UNIT_VALUES / block_len).clamp(1, blocks.max(1));
        let per_row = blocks.div_ceil(unit_blocks);
        let (q_out, s_out, u_out) = (
            DisjointWrites::new(quantized),
            DisjointWrites::new(scales),
            DisjointWrites::new(sums),
        );
        let errors = TaskErrors::default();
        let task = |units: Range<usize>| {
            for unit in units {
                let (r, b0) = (unit / per_row, unit % per_row * unit_blocks);
                let b1 = (b0 + unit_blocks).min(blocks);
                let start = row_start(r) + b0 * block_len;
                let src = &xs[start..start + (b1 - b0) * block_len];
                let (at, nb) = (r * blocks + b0, b1 - b0);
                // SAFETY: unit `(r, b0..b1)` alone writes blocks `b0..b1` of row `r` and
                // their stats, which lie inside the buffers (`r < rows`, `b1 <= blocks`;
                // the stats have `rows · blocks` entries when there are any).
                let (dst, stats) = unsafe {
                    let dst = std::slice::from_raw_parts_mut(q_out.ptr().add(at * bb), nb * bb);
                    let stats = (stat_bytes > 0).then(|| BlockStats {
                        scales: std::slice::from_raw_parts_mut(s_out.ptr().add(at), nb),
                        sums: std::slice::from_raw_parts_mut(u_out.ptr().add(at), nb),
                    });
                    (dst, stats)
                };
                errors.record((kernels.quantize)(act, src, dst, stats));
            }
        };
        let units = rows * per_row;
        let min_units = MIN_TASK_VALUES.div_ceil(unit_blocks * block_len);
        if g.par.threads() > 1 && units >= 2 * min_units {
            g.par.parallel_for(units, min_units, &task);
        } else {
            task(0..units);
        }
        errors.finish()?;
        Ok(acts)
    }

    /// The quantized rows, one after the other.
    pub(crate) fn bytes(&self) -> &[u8] {
        let start = self.stat_bytes + self.gather_bytes;
        &self.lease.as_bytes()[start..start + self.rows * self.row_bytes]
    }

    /// Row `t` as the eight-row kernels take it: its blocks, and for Q8_0 rows with
    /// stats their scales and sums (null pointers otherwise: Q8_K blocks carry theirs).
    pub(crate) fn row(&self, t: usize) -> ActRow {
        let blocks = self.bytes()[t * self.row_bytes..].as_ptr();
        if self.stat_bytes == 0 {
            return ActRow {
                blocks,
                scales: std::ptr::null(),
                sums: std::ptr::null(),
            };
        }
        let (scales, sums) = self.lease.as_bytes()[..self.stat_bytes].split_at(self.stat_bytes / 2);
        let (scales, sums): (&[f32], &[i32]) =
            (bytemuck::cast_slice(scales), bytemuck::cast_slice(sums));
        ActRow {
            blocks,
            scales: scales[t * self.blocks..].as_ptr(),
            sums: sums[t * self.blocks..].as_ptr(),
        }
    }
}

/// Each Q8_0 block's scale (f32) and `Σ qs` (i32), for every block of `acts`.
pub(crate) fn q8_0_block_stats(acts: &[u8], scales: &mut [f32], sums: &mut [i32]) {
    for ((block, scale), sum) in acts.chunks_exact(34).zip(scales).zip(sums) {
        *scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        *sum = block[2..].iter().map(|&q| q as i8 as i32).sum();
    }
}
