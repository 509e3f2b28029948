//! `Backend::prepare_weight` on the CPU: Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
//! MXFP4, TQ1_0 and TQ2_0 weights are copied once, at load, into their row-interleaved
//! layouts ([`crate::interleaved`]), as an [`InterleavedWeight`] behind a tensor that keeps
//! the file's dtype; a stack of experts' weights `[E, N, K]` is interleaved per expert (its
//! `E · N` rows in groups of eight, which never straddle two experts when `N` is a multiple
//! of 8). The eight-row kernels read a group as one stream for decode (one sequential run
//! instead of eight row streams: every format reads its weights from memory faster so) and,
//! for Q4_0, Q4_K, Q5_K, IQ4_NL, IQ4_XS, MXFP4 and the ternary formats, unpack it once per
//! tile of activation rows for prefill (int8 at every row count, ahead of the dequantizing
//! GEMM; with a fast prefill, Q8_0 and Q6_K prefill is dequantized while packing).
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
//! one thread), in GB/s of weights read: see `docs/perf-log.md`.

use std::ops::Range;

use tempra_tensor::{DType, Layout, Result, Storage, Tensor};

use crate::interleaved::{InterleavedLayout, InterleavedWeight, ROW_GROUP, interleave_rows};
use crate::parallel::{DisjointWrites, TaskErrors};
use crate::products::Products;

/// The copy of `w [N, K]` (or of a stack of experts' weights `[E, N, K]`) that `linear`
/// (`expert_linear`) reads fastest, or `None` when it is kept as it is. Block formats
/// with an interleaved layout go into it, when the ISA has interleaved kernels (the
/// portable path reads row-major blocks faster), `N` is a multiple of 8 (so each
/// expert's rows are whole groups of their own) and `w` is contiguous. Float weights in a
/// file mapping are copied as they are, when contiguous, into memory on huge pages.
pub(crate) fn prepare_weight(products: &Products<'_>, w: &Tensor) -> Result<Option<Tensor>> {
    let rank = w.rank();
    if !matches!(rank, 2 | 3) || w.dims().contains(&0) || !w.layout().is_contiguous() {
        return Ok(None);
    }
    // All rows of the matrix or of every expert, one after the other.
    let (n, k) = (w.elem_count() / w.shape().last(), w.shape().last());
    if matches!(w.dtype(), DType::F32 | DType::F16 | DType::BF16) {
        if !matches!(w.storage(), Storage::Mapped(_)) {
            return Ok(None);
        }
        // A view split from a fused matrix starts past its mapping's first byte.
        let len = w.layout().bytes_spanned() - w.layout().offset() * w.dtype().block_bytes();
        let mut storage = Storage::owned_zeroed(len)?;
        let dst = &mut storage.host_bytes_mut()?[..len];
        copy_rows(products, w, n, dst, 1, |_, rows, part| {
            part.copy_from_slice(rows);
            Ok(())
        })?;
        return Tensor::from_storage(storage, Layout::contiguous(*w.shape(), w.dtype())?).map(Some);
    }
    let Some(layout) = InterleavedLayout::of(w.dtype()) else {
        return Ok(None);
    };
    if !products.avx2 || !w.dims()[rank - 2].is_multiple_of(ROW_GROUP) {
        return Ok(None);
    }
    let mut prepared = InterleavedWeight::zeroed(layout, n, k)?;
    copy_rows(
        products,
        w,
        n,
        prepared.bytes_mut(),
        ROW_GROUP,
        |rows_in, rows, part| interleave_rows(layout, rows_in, k, rows, part),
    )?;
    prepared.into_tensor(w.dims()).map(Some)
}

/// Writes the `n` rows of `w` (contiguous, `n` a multiple of `group`) into `dst` by
/// `write(rows, source bytes, destination bytes)` over whole groups of rows, the groups
/// split over the worker pool.
fn copy_rows(
    products: &Products<'_>,
    w: &Tensor,
    n: usize,
    dst: &mut [u8],
    group: usize,
    write: impl Fn(usize, &[u8], &mut [u8]) -> Result<()> + Sync,
) -> Result<()> {
    // A view may start past its storage's first byte (a matrix split from a fused
    // one): its bytes are `start..bytes_spanned`.
    let start = w.layout().offset() * w.dtype().block_bytes();
    let bytes = w.layout().bytes_spanned() - start;
    let src = &w.storage().host_bytes()?[start..start + bytes];
    // Whole groups of rows per task, at least `MIN_TASK_BYTES` of them: the copy (and the
    // first touch of each fresh page) runs on every worker.
    let (src_group, dst_group) = (bytes / (n / group), dst.len() / (n / group));
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
            errors.record(write(range.len() * group, rows, part));
        },
    );
    errors.finish()
}

/// Interleaved bytes one task writes at least (smaller weights are one task).
const MIN_TASK_BYTES: usize = 1 << 20;
