//! The AVX2 steps every quantized kernel shares: f16 scales, unpacking nibbles and bits
//! to bytes, lane sums, loads, stores and prefetches. Each takes the [`Avx2`] token (every
//! quantized instruction set includes AVX2) and is `#[inline(always)]`, so it compiles
//! into the `#[target_feature]` entry point of the kernel that calls it.

use std::arch::x86_64::*;

use crate::interleaved::legacy::SCALE_ROW_ORDER;
use crate::x86::Avx2;

// SAFETY (for every `unsafe` block below whose comment names only pointers): an `Avx2`
// token exists only on a CPU with AVX2, FMA and F16C, so the intrinsics' features are
// present.

/// `N` 32-byte vectors from `p` on (a record's quants: rows or row pairs).
///
/// # Safety
///
/// `32 · N` readable bytes at `p`.
#[inline(always)]
pub(super) unsafe fn load<const N: usize>(_: Avx2, p: *const u8) -> [__m256i; N] {
    // SAFETY: the token proves AVX.
    let mut v = [unsafe { _mm256_setzero_si256() }; N];
    for (i, v) in v.iter_mut().enumerate() {
        // SAFETY: `32 · N` readable bytes at `p`.
        *v = unsafe { _mm256_loadu_si256(p.add(32 * i) as *const __m256i) };
    }
    v
}

/// An f16 at `p` (any alignment) as f32.
///
/// The value is moved in with `vmovd` from a general register: a lane insert
/// (`vpinsrw`) would merge into whatever register the allocator picks, and when that is
/// an accumulator the merge chains every block to the previous block's FMA, which made
/// the Q4_0 dot several times slower per block.
///
/// # Safety
///
/// `p` points to 2 readable bytes.
#[inline(always)]
pub(super) unsafe fn fp16(_: Avx2, p: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at `p`.
    let bits = unsafe { std::ptr::read_unaligned(p as *const u16) } as u32;
    // SAFETY: the token proves F16C.
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))) }
}

/// The product of the f16 values at `p` and `q` (both converted in one instruction).
///
/// # Safety
///
/// `p` and `q` point to 2 readable bytes each.
#[inline(always)]
pub(super) unsafe fn fp16_product(_: Avx2, p: *const u8, q: *const u8) -> f32 {
    // SAFETY: 2 readable bytes at each pointer.
    let (a, b) = unsafe {
        (
            std::ptr::read_unaligned(p as *const u16) as u32,
            std::ptr::read_unaligned(q as *const u16) as u32,
        )
    };
    // SAFETY: the token proves F16C.
    unsafe {
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128((a | (b << 16)) as i32));
        _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)))
    }
}

/// 16 bytes at `p` split into 32 nibbles: lanes 0..16 the low nibbles, 16..32 the high.
///
/// # Safety
///
/// `p` points to 16 readable bytes.
#[inline(always)]
pub(super) unsafe fn nibbles32(_: Avx2, p: *const u8) -> __m256i {
    // SAFETY: 16 readable bytes; the token proves AVX2.
    unsafe {
        let lo = _mm_loadu_si128(p as *const __m128i);
        let both = _mm256_set_m128i(_mm_srli_epi16(lo, 4), lo);
        _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
    }
}

/// 32 bits at `p` spread to 32 bytes: 0xFF where the bit is set, else 0.
///
/// # Safety
///
/// `p` points to 4 readable bytes.
#[inline(always)]
pub(super) unsafe fn bits32(_: Avx2, p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes.
    let x = unsafe { std::ptr::read_unaligned(p as *const u32) } as i32;
    // SAFETY: the token proves AVX2.
    unsafe {
        let shuffle = _mm256_set_epi64x(
            0x0303030303030303,
            0x0202020202020202,
            0x0101010101010101,
            0,
        );
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x), shuffle);
        let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
        _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
    }
}

/// A 4-byte run at `p` broadcast to every i32 lane.
///
/// # Safety
///
/// 4 readable bytes at `p`.
#[inline(always)]
pub(super) unsafe fn broadcast_run(_: Avx2, p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes at `p`; the token proves AVX2.
    unsafe { _mm256_set1_epi32(std::ptr::read_unaligned(p as *const i32)) }
}

/// The sum of the 8 lanes.
#[inline(always)]
pub(super) fn hsum(s: Avx2, v: __m256) -> f32 {
    // SAFETY: the token proves AVX.
    let half = unsafe { _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)) };
    hsum128(s, half)
}

/// The sum of the 4 lanes.
#[inline(always)]
pub(super) fn hsum128(_: Avx2, v: __m128) -> f32 {
    // SAFETY: the token proves SSE3.
    unsafe {
        let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }
}

/// The first `R` activation row pointers as an array.
///
/// # Safety
///
/// `acts.len() >= R`.
#[inline(always)]
pub(super) unsafe fn rows<const R: usize>(acts: &[*const u8]) -> [*const u8; R] {
    debug_assert!(acts.len() >= R);
    // SAFETY: the caller guarantees `R` entries.
    std::array::from_fn(|r| unsafe { *acts.get_unchecked(r) })
}

/// How far ahead of the current group record the eight-row kernels prefetch: without
/// the hints, or with shorter distances, the Q4_0 GEMV from memory waited on the stream;
/// this distance read fastest.
const RECORD_PREFETCH_BYTES: usize = 4096;

/// Asks for the `lines` cache lines from [`RECORD_PREFETCH_BYTES`] past `p` into L2 (a
/// hint: never faults, even past the end of the weights).
///
/// `T1` (to L2) rather than `T0` (to L1): with it the Q4_K and Q4_0 group GEMVs read
/// their weights from memory faster (`decode_gemv_out_of_cache`; Q8_0 the same), and
/// Q4_K_M and Q4_0 decode gained from it; `T2` was between the two and `NTA` far slower.
#[inline(always)]
pub(super) fn prefetch_record(_: Avx2, p: *const u8, lines: usize) {
    for line in 0..lines {
        // SAFETY: a prefetch is only a hint and never dereferences; `wrapping_add`
        // keeps the pointer arithmetic defined even past the allocation.
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(
                p.wrapping_add(RECORD_PREFETCH_BYTES + 64 * line) as *const i8
            )
        };
    }
}

/// Asks for the `lines` cache lines from `ahead` bytes past `p` into L1 (the one-row
/// dots' weight rows; a hint that never faults).
#[inline(always)]
pub(super) fn prefetch_row(_: Avx2, p: *const u8, ahead: usize, lines: usize) {
    for line in 0..lines {
        // SAFETY: a prefetch is only a hint and never dereferences; `wrapping_add`
        // keeps the address arithmetic defined past the row's end.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(ahead + 64 * line) as *const i8) };
    }
}

/// Writes each accumulator to its output row as it is (lane `l` is row `l`: the
/// lane-per-row K-quant group kernels).
#[inline(always)]
pub(super) fn store_lanes<const R: usize>(_: Avx2, acc: &[__m256; R], out: &mut [[f32; 8]]) {
    for (acc, out) in acc.iter().zip(out) {
        // SAFETY: 8 writable f32s; the token proves AVX.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), *acc) };
    }
}

/// Writes each accumulator's lanes (the legacy records' scale order) to the rows they
/// belong to.
#[inline(always)]
pub(super) fn store_rows<const R: usize>(_: Avx2, acc: &[__m256; R], out: &mut [[f32; 8]]) {
    for (acc, out) in acc.iter().zip(out) {
        let mut lanes = [0f32; 8];
        // SAFETY: 8 writable f32s; the token proves AVX.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), *acc) };
        for (lane, &row) in SCALE_ROW_ORDER.iter().enumerate() {
            out[row] = lanes[lane];
        }
    }
}
