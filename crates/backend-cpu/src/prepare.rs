//! `Backend::prepare_weight` on the CPU: Q4_0, Q8_0, Q4_K, Q5_K and Q6_K weights are
//! copied once, at load, into the row-interleaved layouts
//! [`DType::Q4_0R8`](tempra_tensor::DType::Q4_0R8),
//! [`DType::Q8_0R8`](tempra_tensor::DType::Q8_0R8),
//! [`DType::Q4KR8`](tempra_tensor::DType::Q4KR8),
//! [`DType::Q5KR8`](tempra_tensor::DType::Q5KR8) and
//! [`DType::Q6KR8`](tempra_tensor::DType::Q6KR8), which the eight-row kernels read as
//! one stream for decode (one sequential run instead of eight row streams: every format
//! reads its weights from memory faster so) and, for Q4_0R8, Q4KR8 and Q5KR8, unpack
//! once per four activation rows for prefill (int8 at every row count, ahead of the
//! dequantizing GEMM; with a fast prefill, Q8_0R8 and Q6KR8 prefill is dequantized
//! while packing).
//! F32, F16 and BF16 matrices that a file mapping holds are copied as they are into
//! fresh host memory, whose blocks of 2 MiB and more sit on transparent huge pages: the
//! decode stream then crosses a page (a TLB miss and a hardware prefetcher that starts
//! over) every 2 MiB instead of every 4 KiB. Other formats, and weights already in
//! memory, are kept. Each copy is split over the worker pool by whole groups of rows
//! (eight, for the interleaved layouts), at least 1 MiB per task (the first touch of the
//! fresh pages, which the kernel zeroes, is spread with it).
//!
//! The decode read rates come from `cargo test --release -p tempra-backend-cpu --lib
//! decode_gemv_out_of_cache -- --ignored --nocapture` (2048 × 5632 weights from memory,
//! one thread), in GB/s of weights read: see the crate README.

use std::ops::Range;

use tempra_tensor::quant::interleave_rows;
use tempra_tensor::{DType, Layout, Result, Storage, Tensor, TensorError};

use crate::parallel::{DisjointWrites, TaskErrors};
use crate::products::Products;

/// The copy of `w [N, K]` that `linear` reads fastest, or `None` when it is kept as it
/// is. Block formats with an interleaved layout go into it, when the ISA has
/// interleaved kernels (the portable path reads row-major blocks faster), `N` is a
/// multiple of 8 and `w` is contiguous. Float weights in a file mapping are copied as
/// they are, when contiguous, into memory on huge pages.
pub(crate) fn prepare_weight(products: &Products<'_>, w: &Tensor) -> Result<Option<Tensor>> {
    if matches!(w.dtype(), DType::F32 | DType::F16 | DType::BF16) {
        let mapped = matches!(w.storage(), Storage::Mapped(_));
        if !mapped || w.dims().len() != 2 || w.dims().contains(&0) || !w.layout().is_contiguous() {
            return Ok(None);
        }
        return copy_rows(products, w, w.dtype(), 1, |_, _, rows, part| {
            part.copy_from_slice(rows);
            Ok(())
        })
        .map(Some);
    }
    let Some(target) = w.dtype().interleaved() else {
        return Ok(None);
    };
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let group = target.row_group();
    if !products.avx2 || n == 0 || !n.is_multiple_of(group) || !w.layout().is_contiguous() {
        return Ok(None);
    }
    copy_rows(products, w, target, group, |target, rows_in, rows, part| {
        interleave_rows(target, rows_in, k, rows, part)
    })
    .map(Some)
}

/// `w [N, K]` (contiguous, `N` a multiple of `group`) written as `target` into fresh
/// owned memory by `write(target, rows, source bytes, destination bytes)` over whole
/// groups of rows, the groups split over the worker pool.
fn copy_rows(
    products: &Products<'_>,
    w: &Tensor,
    target: DType,
    group: usize,
    write: impl Fn(DType, usize, &[u8], &mut [u8]) -> Result<()> + Sync,
) -> Result<Tensor> {
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let bytes = w.layout().bytes_spanned();
    let start = w.layout().offset() * w.dtype().block_bytes();
    let src = &w.storage().host_bytes()?[start..start + bytes];
    let packed = target.bytes_for(n * k).ok_or(TensorError::Argument {
        op: "prepare_weight",
        name: "w",
        reason: format!("[{n}, {k}] is not whole blocks of {target}"),
    })?;
    let mut storage = Storage::owned_zeroed(packed)?;
    let dst = &mut storage.host_bytes_mut()?[..packed];
    // Whole groups of rows per task, at least `MIN_TASK_BYTES` of them: the copy (and the
    // first touch of each fresh page) runs on every worker.
    let (src_group, dst_group) = (bytes / (n / group), packed / (n / group));
    let out = DisjointWrites::new(dst);
    let errors = TaskErrors::default();
    products.gemm.par.parallel_for(
        n / group,
        MIN_TASK_BYTES.div_ceil(dst_group),
        &|range: Range<usize>| {
            // SAFETY: tasks get disjoint group ranges, so these byte ranges of `dst` are
            // disjoint and inside it; `dst` outlives the call, which returns only after
            // every task has ended.
            let part = unsafe {
                std::slice::from_raw_parts_mut(
                    out.ptr().add(range.start * dst_group),
                    range.len() * dst_group,
                )
            };
            let rows = &src[range.start * src_group..range.end * src_group];
            errors.record(write(target, range.len() * group, rows, part));
        },
    );
    errors.finish()?;
    Tensor::from_storage(storage, Layout::contiguous(*w.shape(), target)?)
}

/// Interleaved bytes one task writes at least (smaller weights are one task).
const MIN_TASK_BYTES: usize = 1 << 20;
