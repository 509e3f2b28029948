//! `Backend::prepare_weight` on the CPU: Q4_0, Q8_0, Q4_K, Q5_K and Q6_K weights are
//! copied once, at load, into the row-interleaved layouts
//! [`DType::Q4_0R8`](tempra_tensor::DType::Q4_0R8),
//! [`DType::Q8_0R8`](tempra_tensor::DType::Q8_0R8),
//! [`DType::Q4KR8`](tempra_tensor::DType::Q4KR8),
//! [`DType::Q5KR8`](tempra_tensor::DType::Q5KR8) and
//! [`DType::Q6KR8`](tempra_tensor::DType::Q6KR8), which the eight-row kernels read as
//! one stream for decode (on the AVX-512 Xeon from memory at 1 thread: Q8_0 12.1 → 14.5
//! GB/s, Q6_K 11.9 → 13.5, Q5_K 11.1–11.3 → 13.0–13.5) and, for Q4_0R8, Q4KR8 and
//! Q5KR8, unpack once per four activation rows for prefill (int8 at every row count:
//! 512 × 2048 × 2048 at 1 thread, Q4_0 111 against 53 GFLOP/s dequantized, Q4_K 74
//! against 49; Q8_0R8 and Q6KR8 prefill is dequantized while packing).
//! Other formats are kept.
//!
//! Measured with `cargo test --release -p tempra-backend-cpu --lib
//! decode_gemv_out_of_cache -- --ignored --nocapture` (2048 × 5632 weights from memory,
//! 1 thread, Zen 3), in GB/s of weights read: see the crate README.

use tempra_tensor::quant::interleave_rows;
use tempra_tensor::{Layout, Result, Storage, Tensor, TensorError};

use crate::products::Products;

/// The interleaved copy of `w [N, K]`, or `None` when it is kept as it is: the format
/// has no interleaved layout, the ISA has no interleaved kernels (the portable path
/// reads row-major blocks faster), `N` is not a multiple of 8 or `w` is a strided view.
pub(crate) fn prepare_weight(products: &Products<'_>, w: &Tensor) -> Result<Option<Tensor>> {
    let Some(target) = w.dtype().interleaved() else {
        return Ok(None);
    };
    let (n, k) = (w.dims()[0], w.dims()[1]);
    let group = target.row_group();
    if !products.avx2 || n == 0 || !n.is_multiple_of(group) || !w.layout().is_contiguous() {
        return Ok(None);
    }
    let bytes = w.layout().bytes_spanned();
    let start = w.layout().offset() * w.dtype().block_bytes();
    let src = &w.storage().host_bytes()?[start..start + bytes];
    let packed = target.bytes_for(n * k).ok_or(TensorError::Argument {
        op: "prepare_weight",
        name: "w",
        reason: format!("[{n}, {k}] is not whole blocks of {target}"),
    })?;
    let mut storage = Storage::owned_zeroed(packed)?;
    interleave_rows(target, n, k, src, &mut storage.host_bytes_mut()?[..packed])?;
    Tensor::from_storage(storage, Layout::contiguous(*w.shape(), target)?).map(Some)
}
