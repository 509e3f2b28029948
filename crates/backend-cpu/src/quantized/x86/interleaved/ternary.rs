//! The TQ1_0 and TQ2_0 group product (records in `crate::interleaved::ternary`: both
//! hold TQ2_0's 2-bit codes `t + 1`): every 32-bit lane belongs to one of the group's
//! eight rows throughout. A step's 32 code bytes (four of each row) give four code
//! vectors by a shift and a mask each, once per record for every activation row; each
//! meets a 4-byte activation run broadcast to all lanes. The codes (0..=3) multiply the
//! activations unsigned, and the block's `Σ q` (from Q8_K's sums of 16) is subtracted
//! once per row and super-block: `Σ (t + 1) · q − Σ q`.
//!
//! - VNNI: one `vpdpbusd` per code vector into i32 lanes.
//! - AVX2: `maddubs` added in 16 bits (a chain takes at most 32 of them, each at most
//!   2 · 3 · 127, within 16 bits), widened by one `madd` per super-block.

use std::arch::x86_64::*;

use super::super::vectors::{prefetch_record, store_lanes};
use super::super::{GroupProduct, IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use super::q4_k::step;
use crate::interleaved::ternary::{D, QS, RECORD, STEPS};
use crate::quantized::kernels::ActRow;

/// A chain's sum in i32 lanes (on AVX2 its 16-bit pairs added by one `madd`).
#[inline(always)]
fn widened<I: IntDots>(_: I, chain: __m256i) -> __m256i {
    if I::VNNI {
        chain
    } else {
        // SAFETY: every token proves AVX2.
        unsafe { _mm256_madd_epi16(chain, _mm256_set1_epi16(1)) }
    }
}

/// The sum of a Q8_K block's 256 quants (its sixteen 16-value sums added), in every
/// lane.
///
/// # Safety
///
/// `block` points to a readable Q8_K block; AVX2 present.
#[inline(always)]
unsafe fn block_sum(block: *const u8) -> __m256i {
    // SAFETY: the block's 32 bytes of sums (the caller's contract).
    unsafe {
        let s = _mm256_madd_epi16(
            _mm256_loadu_si256(block.add(Q8K_BSUMS) as *const __m256i),
            _mm256_set1_epi16(1),
        );
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm256_broadcastd_epi32(s)
    }
}

/// The group product of TQ1_0 and TQ2_0 records (against Q8_K activation rows).
pub(in crate::quantized::x86) struct TernaryGroup;

impl GroupProduct for TernaryGroup {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        let s = isa.avx2();
        // The four bit pairs of a step go to this many chains per row: enough
        // independent chains to cover `vpdpbusd`'s latency at every row count.
        let chains = if R == 1 { 4 } else { 2 };
        // SAFETY: the token proves AVX.
        let (zero, mut acc) = unsafe { (_mm256_setzero_si256(), [_mm256_setzero_ps(); R]) };
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group and super-block `b` of each activation
            // row (the `GemmR8Fn` contract): every offset below lies inside them; the
            // token proves AVX2, FMA and F16C.
            unsafe {
                let record = w.add(b * RECORD);
                let mut a = [std::ptr::null::<u8>(); R];
                for (r, a) in a.iter_mut().enumerate() {
                    *a = acts.get_unchecked(r).blocks.add(b * Q8K_BYTES);
                }
                let mut sums = [[zero; R]; 4];
                for step_index in 0..STEPS {
                    if step_index % 4 == 0 {
                        // The record's lines ahead, a quarter per four steps.
                        let quarter = record.add(RECORD / 4 * (step_index / 4));
                        prefetch_record(s, quarter, RECORD.div_ceil(4 * 64));
                    }
                    let v = _mm256_loadu_si256(record.add(QS + 32 * step_index) as *const __m256i);
                    let m3 = _mm256_set1_epi8(3);
                    let codes = [
                        _mm256_and_si256(v, m3),
                        _mm256_and_si256(_mm256_srli_epi16(v, 2), m3),
                        _mm256_and_si256(_mm256_srli_epi16(v, 4), m3),
                        _mm256_and_si256(_mm256_srli_epi16(v, 6), m3),
                    ];
                    // Values `128h + 32n + 4k ..` for bit pair `n`.
                    let (h, k) = (step_index / 8, step_index % 8);
                    for r in 0..R {
                        for (n, &codes) in codes.iter().enumerate() {
                            let at = a[r].add(Q8K_QS + 128 * h + 32 * n + 4 * k);
                            let run = _mm256_set1_epi32(std::ptr::read_unaligned(at as *const i32));
                            let c = n % chains;
                            sums[c][r] = step(isa, sums[c][r], codes, run);
                        }
                    }
                }
                let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
                for r in 0..R {
                    let mut total = widened(isa, sums[0][r]);
                    for chain in &sums[1..chains] {
                        total = _mm256_add_epi32(total, widened(isa, chain[r]));
                    }
                    let total = _mm256_sub_epi32(total, block_sum(a[r]));
                    let da = _mm256_set1_ps(std::ptr::read_unaligned(a[r] as *const f32));
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(total), acc[r]);
                }
            }
        }
        store_lanes(s, &acc, out);
    }
}
