//! AVX2 products over the row-interleaved layouts [`DType::Q4_0R8`], [`DType::Q8_0R8`],
//! [`DType::Q4KR8`] and [`DType::Q5KR8`] (Q6KR8's are in `q6_k_r8`):
//! eight weight rows against one to four activation rows (Q8_0, Q8_K), reading one
//! sequential stream (layouts in `tempra_tensor::quant::interleaved` and
//! `interleaved_q4_k`). One row is the decode GEMV; more rows (prefill) reuse each
//! unpacked weight block for every row.
//!
//! Q4_0R8: per block column the eight rows' integer sums are folded into one vector by a
//! `hadd` tree that leaves them in the layout's scale order (rows 0, 2, 4, 6, 1, 3, 5,
//! 7), so the eight f16 scales convert in one instruction and one FMA accumulates the
//! column. Q8_0R8 runs the same kernel loop over its own sums (`q8_0_sums`: 32 quant
//! bytes per row, two rows per 512-bit register at the AVX-512 level).
//!
//! Q4KR8: every 32-bit lane belongs to one row throughout. Each 32-byte load holds four
//! quant bytes of each row; `maddubs` against a four-byte activation run broadcast to
//! all lanes, eight steps summed in 16 bits, and one `madd` with the rows' scales of
//! the sub-block (bytes doubled into 16-bit pairs) finish a sub-block for all eight
//! rows. No shuffle per sub-block and no horizontal sums: about 270 vector operations
//! per record against 350 for the row-pair arrangement this replaced. Q5KR8 runs the
//! same kernel (`k_r8_kernel!`) with its fifth bits ORed into each step's levels
//! (`q4_k_sums::levels_q5_k`); on AVX2 its steps go to two 16-bit partials of four.
//!
//! [`DType::Q4_0R8`]: tempra_tensor::DType::Q4_0R8
//! [`DType::Q8_0R8`]: tempra_tensor::DType::Q8_0R8
//! [`DType::Q4KR8`]: tempra_tensor::DType::Q4KR8
//! [`DType::Q5KR8`]: tempra_tensor::DType::Q5KR8

use std::arch::x86_64::*;

use tempra_tensor::quant::SCALE_ROW_ORDER;

use tempra_tensor::DType;

use super::{
    Q8K_BSUMS, Q8K_BYTES, Q8K_QS, load_vectors, q4_0_eight_row_sums, q4_k_sums, q8_0_sums,
    rows_dispatch, vnni,
};
use crate::quantized::kernels::{ActRow, GemmR8Fn};

/// Q4_0R8 weights × one to four Q8_0 activation rows.
pub(super) const GEMM_Q4_0_R8: GemmR8Fn = rows_dispatch!(gemm_q4_0_r8, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q4_0_R8`] with `vpdpbusd` (VEX-encoded AVX-VNNI) for the integer sums.
pub(super) const GEMM_Q4_0_R8_AVX_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q4_0_r8_avx_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q4_0_R8`] with `vpdpbusd` (AVX-512 VNNI on 256-bit vectors) for the integer
/// sums.
pub(super) const GEMM_Q4_0_R8_AVX512_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q4_0_r8_avx512_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// Q8_0R8 weights × one to four Q8_0 activation rows.
pub(super) const GEMM_Q8_0_R8: GemmR8Fn = rows_dispatch!(gemm_q8_0_r8, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q8_0_R8`] with AVX-VNNI `vpdpbusd` (weights biased to unsigned).
pub(super) const GEMM_Q8_0_R8_AVX_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q8_0_r8_avx_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q8_0_R8`] with AVX-512 VNNI on 512-bit vectors (two rows per register).
pub(super) const GEMM_Q8_0_R8_AVX512_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q8_0_r8_avx512_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// Q4_KR8 weights × one to four Q8_K activation rows.
pub(super) const GEMM_Q4_K_R8: GemmR8Fn = rows_dispatch!(gemm_q4_k_r8, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q4_K_R8`] with AVX-VNNI `vpdpbusd` (sub-block sums in 32 bits).
pub(super) const GEMM_Q4_K_R8_AVX_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q4_k_r8_avx_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q4_K_R8`] with AVX-512 VNNI `vpdpbusd` on 256-bit vectors.
pub(super) const GEMM_Q4_K_R8_AVX512_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q4_k_r8_avx512_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// Q5_KR8 weights × one to four Q8_K activation rows.
pub(super) const GEMM_Q5_K_R8: GemmR8Fn = rows_dispatch!(gemm_q5_k_r8, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q5_K_R8`] with AVX-VNNI `vpdpbusd`.
pub(super) const GEMM_Q5_K_R8_AVX_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q5_k_r8_avx_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// [`GEMM_Q5_K_R8`] with AVX-512 VNNI `vpdpbusd` on 256-bit vectors.
pub(super) const GEMM_Q5_K_R8_AVX512_VNNI: GemmR8Fn =
    rows_dispatch!(gemm_q5_k_r8_avx512_vnni, GemmR8Fn, ActRow, [f32; 8]);

/// How far ahead of the current record the stream is prefetched: without the hints, or
/// with shorter distances, the Q4_0 GEMV from memory waited on the stream; this distance
/// read fastest.
const PREFETCH_BYTES: usize = 4096;

/// Asks for the `LINES` cache lines from `PREFETCH_BYTES` past `p` into L2 (a hint:
/// never faults, even past the end of the weights).
///
/// `T1` (to L2) rather than `T0` (to L1): with it the Q4_KR8 and Q4_0R8 GEMVs read
/// their weights from memory faster (`decode_gemv_out_of_cache`; Q8_0R8 the same), and
/// Q4_K_M and Q4_0 decode gained from it; `T2` was between the two and `NTA` far slower.
#[inline(always)]
pub(super) fn prefetch_ahead<const LINES: usize>(p: *const u8) {
    for line in 0..LINES {
        // SAFETY: a prefetch is only a hint and never dereferences; `wrapping_add`
        // keeps the pointer arithmetic defined even past the allocation.
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(PREFETCH_BYTES + 64 * line) as *const i8)
        };
    }
}

/// Writes each accumulator to its output row as it is (lane `l` is row `l`: the
/// lane-per-row kernels, here and in `q6_k_r8`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn store_lanes<const R: usize>(acc: &[__m256; R], out: &mut [[f32; 8]]) {
    for (acc, out) in acc.iter().zip(out) {
        // SAFETY: 8 writable f32s.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), *acc) };
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

/// Defines a product `$name::<R>` of a row-interleaved 32-value format `$dtype` (per
/// block column a record: eight f16 scales, then the rows' quants) × Q8_0, compiled with
/// `$features`: per record, `$load` reads the quants once, and `$sums(rows, a, Σ a)`
/// folds them against each activation block into eight i32 sums in scale order (the
/// `maddubs` trees, or `vpdpbusd` ones where VNNI is present).
macro_rules! legacy_r8_kernel {
    ($name:ident, $features:literal, $dtype:expr, $load:path, $sums:path) => {
        /// # Safety
        ///
        /// See [`GemmR8Fn`] (here each `acts[r]` holds `nb` Q8_0 blocks, scales and sums);
        /// `acts.len() >= R`; the CPU has the kernel's features.
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[ActRow],
            out: &mut [[f32; 8]],
        ) {
            const RECORD: usize = 8 * $dtype.block_bytes();
            const AB: usize = 34;
            let mut acc = [_mm256_setzero_ps(); R];
            for b in 0..nb {
                // SAFETY: record `b < nb` of the group and block `b` of each activation
                // row with its scale and sum (the `GemmR8Fn` contract).
                unsafe {
                    let record = w.add(b * RECORD);
                    prefetch_ahead::<{ RECORD.div_ceil(64) }>(record);
                    let rows = $load(record.add(16));
                    let w_scales = _mm256_cvtph_ps(_mm_loadu_si128(record as *const __m128i));
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let act = acts.get_unchecked(r);
                        let sums = $sums(rows, act.blocks.add(b * AB + 2), *act.sums.add(b));
                        let d = _mm256_mul_ps(w_scales, _mm256_set1_ps(*act.scales.add(b)));
                        *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *acc);
                    }
                }
            }
            store_rows(&acc, out);
        }
    };
}

legacy_r8_kernel!(
    gemm_q4_0_r8,
    "avx2,fma,f16c",
    DType::Q4_0R8,
    load_vectors::<4>,
    q4_0_eight_row_sums
);
legacy_r8_kernel!(
    gemm_q4_0_r8_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    DType::Q4_0R8,
    load_vectors::<4>,
    vnni::q4_0_eight_row_sums_avx_vnni
);
legacy_r8_kernel!(
    gemm_q4_0_r8_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    DType::Q4_0R8,
    load_vectors::<4>,
    vnni::q4_0_eight_row_sums_avx512_vnni
);
legacy_r8_kernel!(
    gemm_q8_0_r8,
    "avx2,fma,f16c",
    DType::Q8_0R8,
    load_vectors::<8>,
    q8_0_sums::sums_avx2
);
legacy_r8_kernel!(
    gemm_q8_0_r8_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    DType::Q8_0R8,
    q8_0_sums::rows_biased,
    q8_0_sums::sums_avx_vnni
);
legacy_r8_kernel!(
    gemm_q8_0_r8_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vnni",
    DType::Q8_0R8,
    q8_0_sums::row_pairs_biased,
    q8_0_sums::sums_avx512_vnni
);

/// Defines a product `$name::<R>` of a row-interleaved K-quant with Q4_KR8's record
/// scheme (Q4_KR8, Q5_KR8: layout module `$layout`) × Q8_K, compiled with `$features`:
/// `$quants(record, j, k)` gives step `k` of chunk `j` as two vectors of levels (the
/// sub-blocks `2j` and `2j + 1`), `$step(acc, q, a)` adds a step's u8 × i8 products
/// into a sub-block accumulator, `$scales(sc)` widens a chunk's 16 scale bytes for
/// `$join(lo, sc_lo, hi, sc_hi)`, which applies them to the two sub-blocks' sums (each
/// as two partial accumulators, even and odd steps) and returns i32 lanes (one per
/// row). The steps are split into the two partials at one activation row (two
/// dependency chains), and at every row count when `$split` (where eight steps would
/// overflow 16-bit sums).
macro_rules! k_r8_kernel {
    (
        $name:ident,
        $features:literal,
        $layout:ident,
        $quants:path,
        $split:expr,
        $step:path,
        $scales:path,
        $join:path
    ) => {
        /// # Safety
        ///
        /// See [`GemmR8Fn`] (here each `acts[r].blocks` points to `nb` Q8_K blocks; the scales
        /// and sums pointers are not read); `acts.len() >= R`; the CPU has the kernel's
        /// features.
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize>(
            nb: usize,
            w: *const u8,
            acts: &[ActRow],
            out: &mut [[f32; 8]],
        ) {
            use tempra_tensor::quant::$layout::{D, DMIN, MINS, RECORD, SCALES};
            let mut acc = [_mm256_setzero_ps(); R];
            for b in 0..nb {
                // SAFETY: record `b < nb` of the group and super-block `b` of each activation
                // row (the `GemmR8Fn` contract).
                unsafe {
                    let record = w.add(b * RECORD);
                    let a: [*const u8; R] =
                        std::array::from_fn(|r| acts.get_unchecked(r).blocks.add(b * Q8K_BYTES));
                    // Lane l of every integer vector belongs to row l. Per 64-value chunk: eight
                    // steps of 4 values per row (`$step`), then the sub-block's scales applied
                    // once for the eight rows (`$join`).
                    let mut sums = [_mm256_setzero_si256(); R];
                    for j in 0..4 {
                        // The record's lines ahead, a quarter per chunk (Q4_KR8: five of 19):
                        // as one burst of 19 at the record's start they filled the miss queue
                        // and the stream ran at the sum of compute and memory time; spread
                        // out, the memory time hides behind the compute (both the GEMV from
                        // memory and Q4_K_M decode gained).
                        prefetch_ahead::<{ RECORD.div_ceil(4 * 64) }>(record.add(RECORD / 4 * j));
                        let sc = _mm_loadu_si128(record.add(SCALES + 16 * j) as *const __m128i);
                        let (sc_lo, sc_hi) = $scales(sc);
                        // With one row, even and odd steps in separate accumulators:
                        // two dependency chains of four (`vpdpbusd` has a 5-cycle
                        // latency); more rows interleave their own chains, and a second
                        // set would spill registers (four rows ran much slower with it).
                        let mut lo = [[_mm256_setzero_si256(); R]; 2];
                        let mut hi = [[_mm256_setzero_si256(); R]; 2];
                        for k in 0..8 {
                            let (q_lo, q_hi) = $quants(record, j, k);
                            for r in 0..R {
                                let at = a[r].add(Q8K_QS + 64 * j + 4 * k);
                                let a_lo =
                                    _mm256_set1_epi32(std::ptr::read_unaligned(at as *const i32));
                                let a_hi = _mm256_set1_epi32(std::ptr::read_unaligned(
                                    at.add(32) as *const i32
                                ));
                                let h = if $split || R == 1 { k % 2 } else { 0 };
                                lo[h][r] = $step(lo[h][r], q_lo, a_lo);
                                hi[h][r] = $step(hi[h][r], q_hi, a_hi);
                            }
                        }
                        for r in 0..R {
                            sums[r] = _mm256_add_epi32(
                                sums[r],
                                $join([lo[0][r], lo[1][r]], sc_lo, [hi[0][r], hi[1][r]], sc_hi),
                            );
                        }
                    }
                    // Mins against the activation's sub-block sums (pairs of the 16-value
                    // `bsums`): per chunk, the rows' (m[2j], m[2j + 1]) pairs `madd` the
                    // activation's (S[2j], S[2j + 1]) broadcast to every lane.
                    let sub_sums: [__m256i; R] = std::array::from_fn(|r| {
                        let bsums = a[r].add(Q8K_BSUMS);
                        _mm256_broadcastsi128_si256(_mm_hadd_epi16(
                            _mm_loadu_si128(bsums as *const __m128i),
                            _mm_loadu_si128(bsums.add(16) as *const __m128i),
                        ))
                    });
                    let mut mins = [_mm256_setzero_si256(); R];
                    for j in 0..4 {
                        let m = _mm256_cvtepu8_epi16(_mm_loadu_si128(
                            record.add(MINS + 16 * j) as *const __m128i
                        ));
                        for r in 0..R {
                            let s = match j {
                                0 => _mm256_shuffle_epi32::<0x00>(sub_sums[r]),
                                1 => _mm256_shuffle_epi32::<0x55>(sub_sums[r]),
                                2 => _mm256_shuffle_epi32::<0xAA>(sub_sums[r]),
                                _ => _mm256_shuffle_epi32::<0xFF>(sub_sums[r]),
                            };
                            mins[r] = _mm256_add_epi32(mins[r], _mm256_madd_epi16(m, s));
                        }
                    }
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
                    let dmin = _mm256_cvtph_ps(_mm_loadu_si128(record.add(DMIN) as *const __m128i));
                    for r in 0..R {
                        let da = _mm256_set1_ps(std::ptr::read_unaligned(a[r] as *const f32));
                        acc[r] = _mm256_fmadd_ps(
                            _mm256_mul_ps(d, da),
                            _mm256_cvtepi32_ps(sums[r]),
                            acc[r],
                        );
                        acc[r] = _mm256_fnmadd_ps(
                            _mm256_mul_ps(dmin, da),
                            _mm256_cvtepi32_ps(mins[r]),
                            acc[r],
                        );
                    }
                }
            }
            store_lanes(&acc, out);
        }
    };
}

k_r8_kernel!(
    gemm_q4_k_r8,
    "avx2,fma,f16c",
    interleaved_q4_k,
    q4_k_sums::levels_q4_k,
    false,
    q4_k_sums::step_maddubs,
    q4_k_sums::scales_paired,
    q4_k_sums::join_madd
);
k_r8_kernel!(
    gemm_q4_k_r8_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    interleaved_q4_k,
    q4_k_sums::levels_q4_k,
    false,
    vnni::dpbusd_avx,
    q4_k_sums::scales_wide,
    q4_k_sums::join_mullo
);
k_r8_kernel!(
    gemm_q4_k_r8_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    interleaved_q4_k,
    q4_k_sums::levels_q4_k,
    false,
    vnni::dpbusd_avx512,
    q4_k_sums::scales_wide,
    q4_k_sums::join_mullo
);
// Q5_K levels reach 31: eight AVX2 steps would overflow 16 bits (8 · 2 · 31 · 128), so
// the steps always go to two partials of four, each scaled on its own.
k_r8_kernel!(
    gemm_q5_k_r8,
    "avx2,fma,f16c",
    interleaved_q5_k,
    q4_k_sums::levels_q5_k,
    true,
    q4_k_sums::step_maddubs,
    q4_k_sums::scales_paired,
    q4_k_sums::join_madd_apart
);
k_r8_kernel!(
    gemm_q5_k_r8_avx_vnni,
    "avx2,fma,f16c,avxvnni",
    interleaved_q5_k,
    q4_k_sums::levels_q5_k,
    false,
    vnni::dpbusd_avx,
    q4_k_sums::scales_wide,
    q4_k_sums::join_mullo
);
k_r8_kernel!(
    gemm_q5_k_r8_avx512_vnni,
    "avx2,fma,f16c,avx512f,avx512vl,avx512vnni",
    interleaved_q5_k,
    q4_k_sums::levels_q5_k,
    false,
    vnni::dpbusd_avx512,
    q4_k_sums::scales_wide,
    q4_k_sums::join_mullo
);
