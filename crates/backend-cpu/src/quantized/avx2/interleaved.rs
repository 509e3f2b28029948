//! AVX2 products over the row-interleaved layout [`DType::Q4_0R8`]:
//! eight weight rows against one to four Q8_0 activation rows, reading one sequential
//! stream (the layout is described in `tempra_tensor::quant::interleaved`). One row is
//! the decode GEMV; more rows (prefill) reuse each unpacked weight block for every row.
//!
//! Per block column the eight rows' integer sums are folded into one vector by a `hadd`
//! tree that leaves them in the layout's scale order (rows 0, 2, 4, 6, 1, 3, 5, 7), so
//! the eight f16 scales convert in one instruction and one FMA accumulates the column.
//! The activation block's scale and `Σ q` come precomputed ([`ActRow`]).
//!
//! [`DType::Q4_0R8`]: tempra_tensor::DType::Q4_0R8

use std::arch::x86_64::*;

use tempra_tensor::quant::SCALE_ROW_ORDER;

use super::{q4_0_eight_row_sums, r8_dispatch};
use crate::quantized::kernels::{ActRow, GemmR8Fn};

/// Q4_0R8 weights × one to four Q8_0 activation rows.
pub(super) const GEMM_Q4_0_R8: GemmR8Fn = r8_dispatch!(gemm_q4_0_r8);

/// How far ahead of the current record the stream is prefetched (measured on Zen 3 at
/// one thread on 2048 × 5632 Q4_0 from memory: none 9.5 GB/s, 512 B 10.2, 2 KiB 11.7,
/// 4 KiB 11.4-12.9).
const PREFETCH_BYTES: usize = 4096;

/// Asks for the `LINES` cache lines from `PREFETCH_BYTES` past `p` (a hint: never
/// faults, even past the end of the weights).
#[inline(always)]
fn prefetch_ahead<const LINES: usize>(p: *const u8) {
    for line in 0..LINES {
        // SAFETY: a prefetch is only a hint and never dereferences; `wrapping_add`
        // keeps the pointer arithmetic defined even past the allocation.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_BYTES + 64 * line) as *const i8)
        };
    }
}

/// Writes each accumulator's lanes (scale order) to the rows they belong to.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn store_rows<const R: usize>(acc: &[__m256; R], out: &mut [[f32; 8]]) {
    for (acc, out) in acc.iter().zip(out) {
        let mut lanes = [0f32; 8];
        // SAFETY: 8 writable f32s.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), *acc) };
        for (lane, &row) in SCALE_ROW_ORDER.iter().enumerate() {
            out[row] = lanes[lane];
        }
    }
}

/// # Safety
///
/// See [`GemmR8Fn`]; `acts.len() >= R`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_q4_0_r8<const R: usize>(
    nb: usize,
    w: *const u8,
    acts: &[ActRow],
    out: &mut [[f32; 8]],
) {
    const RECORD: usize = 8 * 18;
    const AB: usize = 34;
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..nb {
        // SAFETY: record `b < nb` of the group and block `b` of each activation row with
        // its scale and sum (the `GemmR8Fn` contract).
        unsafe {
            let record = w.add(b * RECORD);
            prefetch_ahead::<3>(record);
            // Rows 2p (low 128 bits) and 2p + 1 (high 128 bits).
            let rows: [__m256i; 4] = std::array::from_fn(|p| {
                _mm256_loadu_si256(record.add(16 + 32 * p) as *const __m256i)
            });
            let w_scales = _mm256_cvtph_ps(_mm_loadu_si128(record as *const __m128i));
            for (r, acc) in acc.iter_mut().enumerate() {
                let act = acts.get_unchecked(r);
                let sums = q4_0_eight_row_sums(rows, act.blocks.add(b * AB + 2), *act.sums.add(b));
                let d = _mm256_mul_ps(w_scales, _mm256_set1_ps(*act.scales.add(b)));
                *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *acc);
            }
        }
    }
    store_rows(&acc, out);
}
