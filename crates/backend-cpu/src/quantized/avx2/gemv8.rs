//! AVX2 GEMV over eight weight rows at a time against one Q8_0 activation row: the
//! decode kernel for Q4_0 weights.
//!
//! The one-row dot products ([`super::legacy`]) finish every block with a horizontal
//! step (f16 scale product, broadcast, FMA) per weight row. Here eight rows share it:
//! the integer sums of eight rows are folded into one vector with three `hadd`s, the
//! eight f16 weight scales are converted in one instruction and one FMA accumulates the
//! block for all eight rows. The activation block is loaded once per eight rows, and
//! its scale and sum come precomputed ([`super::super::kernels::ActRow`]).
//!
//! Q4_0 avoids the sign trick: `Σ (q − 8)·a = Σ q·a − 8·Σ a`, with `q` the unsigned
//! nibbles (so `maddubs` takes them as they are) and `Σ a` per block precomputed.

use std::arch::x86_64::*;

use crate::quantized::kernels::{ActRow, Gemv8Fn};

/// Q4_0 weights × a Q8_0 activation row.
pub(super) const GEMV8_Q4_0: Gemv8Fn = gemv8_q4_0;

/// Lane `i` of the Q4_0 sums vector holds weight row `Q4_0_LANE_ROW[i]` (the order the
/// `hadd` tree leaves them in).
const Q4_0_LANE_ROW: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// How far ahead of the current block each weight row is prefetched. Eight rows are
/// eight separate streams, more than the hardware prefetchers follow well.
const PREFETCH_BYTES: usize = 384;

/// Asks for the cache line `PREFETCH_BYTES` past `p` (a hint: never faults, even past the
/// end of the weights).
#[inline(always)]
fn prefetch_ahead(p: *const u8) {
    // SAFETY: a prefetch is only a hint and never dereferences; `wrapping_add` keeps
    // the pointer arithmetic defined even when it points past the allocation.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_BYTES) as *const i8) };
}

/// The f16 at `p` as raw bits.
///
/// # Safety
///
/// `p` points to 2 readable bytes.
#[inline(always)]
unsafe fn half_bits(p: *const u8) -> i16 {
    // SAFETY: 2 readable bytes.
    unsafe { std::ptr::read_unaligned(p as *const i16) }
}

/// The eight f16 block scales at `w + row · stride + offset` for the rows in `order`
/// (lane `i` ← row `order[i]`), as f32.
///
/// # Safety
///
/// Each addressed pair of bytes is readable; F16C present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales8(w: *const u8, stride: usize, offset: usize, order: &[usize; 8]) -> __m256 {
    // SAFETY: forwarded: every scale is readable.
    let h = |i: usize| unsafe { half_bits(w.add(order[i] * stride + offset)) };
    _mm256_cvtph_ps(_mm_setr_epi16(
        h(0),
        h(1),
        h(2),
        h(3),
        h(4),
        h(5),
        h(6),
        h(7),
    ))
}

/// # Safety
///
/// See [`Gemv8Fn`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv8_q4_0(nb: usize, w: *const u8, stride: usize, act: &ActRow, out: &mut [f32; 8]) {
    const WB: usize = 18;
    const AB: usize = 34;
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps();
    for b in 0..nb {
        // SAFETY: block `b < nb` of every weight row and of the activation row, its
        // precomputed scale and sum (the `Gemv8Fn` contract).
        unsafe {
            let a = act.blocks.add(b * AB + 2);
            let a_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(a as *const __m128i));
            let a_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(a.add(16) as *const __m128i));
            let mut pairs = [_mm256_setzero_si256(); 4];
            for (p, pair) in pairs.iter_mut().enumerate() {
                let r0 = w.add(2 * p * stride + b * WB + 2);
                prefetch_ahead(r0);
                prefetch_ahead(r0.add(stride));
                let v = _mm256_loadu2_m128i(r0.add(stride) as *const __m128i, r0 as *const __m128i);
                let lo = _mm256_and_si256(v, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                let s16 = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo, a_lo),
                    _mm256_maddubs_epi16(hi, a_hi),
                );
                // Lanes 0..4: partial sums of row 2p; lanes 4..8: of row 2p + 1.
                *pair = _mm256_madd_epi16(s16, ones);
            }
            let sums = _mm256_hadd_epi32(
                _mm256_hadd_epi32(pairs[0], pairs[1]),
                _mm256_hadd_epi32(pairs[2], pairs[3]),
            );
            let sums = _mm256_sub_epi32(sums, _mm256_set1_epi32(8 * *act.sums.add(b)));
            let d = _mm256_mul_ps(
                scales8(w, stride, b * WB, &Q4_0_LANE_ROW),
                _mm256_set1_ps(*act.scales.add(b)),
            );
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
        }
    }
    let mut lanes = [0f32; 8];
    // SAFETY: 8 writable f32s.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    for (lane, &row) in Q4_0_LANE_ROW.iter().enumerate() {
        out[row] = lanes[lane];
    }
}
