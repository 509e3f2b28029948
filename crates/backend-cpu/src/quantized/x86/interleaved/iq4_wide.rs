//! The IQ4_NL, MXFP4, Q4_0 and IQ4_XS group products on 512-bit vectors (AVX-512 BW and
//! VNNI): one load holds a whole run of the record (eight rows, row `l` in 64-bit lane
//! `l`), one byte shuffle per nibble half makes its levels (the codebook biased to
//! unsigned bytes, `level + 128`; Q4_0's nibbles serve as they are), and one `vpdpbusd`
//! per activation row multiplies it against the activation's 8-byte run broadcast to
//! every 64-bit lane: half the multiply instructions of the 256-bit products in
//! `iq4.rs`, which hold half a run.
//!
//! Each row's sums stay in its lane's two 32-bit halves until the end of the call. The
//! bias `128 · Σ a` (Q4_0: `8 · Σ a`) of a sub-block starts the even half's sum (one
//! broadcast, from memory for IQ4_XS), each half is scaled and accumulated in f32 on its
//! own (the rows' scales doubled to fill both halves), and the two halves of each row
//! are added when the eight outputs are written.
//!
//! The functions are compiled with BW (the byte shuffle and the 16-bit shift on 512-bit
//! vectors), which the quantized kernels' entry points leave out, so they are called,
//! not inlined, once per group.

use std::arch::x86_64::*;

use super::super::int_dots::Vnni;
use super::super::vectors::prefetch_record;
use super::super::{IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use super::iq4::{IQ4_LEVELS, Iq4NlRecord, Levels, NibbleBlocks, Q8_0_BYTES};
use crate::interleaved::iq4::{SUB_BLOCK_RUNS, XS_QS, XS_RECORD, XS_SCALES};
use crate::quantized::kernels::ActRow;
use crate::x86::Avx512;

// SAFETY (for every `unsafe` block below whose comment names only pointers): the
// functions are compiled with the features of the intrinsics they call, which the
// `Vnni<Avx512>` token they take proves.

/// Each row's `start[r] + Σ (level + bias) · a` over one 32-value sub-block, in its pair
/// of lanes: the two runs at `q` against the 32 activation quants at each `a[r]` (the
/// codebook's biased levels, `bias` 128, or Q4_0's nibbles as they are, `bias` 8). The
/// callers start the sums at `−bias · Σ a` in the even lane ([`bias_start`]).
///
/// # Safety
///
/// 128 readable bytes at `q`, 32 at each `a[r]`; the CPU has AVX-512 F, BW and VNNI
/// (the caller is compiled with them).
#[inline(always)]
unsafe fn sub_block_sums<const R: usize>(
    levels: &Levels,
    book: __m512i,
    q: *const u8,
    a: &[*const u8; R],
    start: [__m512i; R],
) -> [__m512i; R] {
    // SAFETY: the caller's contract.
    unsafe {
        let m4 = _mm512_set1_epi8(0x0F);
        // One row's four products form one chain; a lone row splits its chain in two
        // (`vpdpbusd` has a 5-cycle latency), several rows interleave their own.
        let mut acc = start;
        let mut second = [_mm512_setzero_si512(); R];
        for p in 0..2 {
            let v = _mm512_loadu_si512(q.add(64 * p) as *const __m512i);
            let bytes = |n: __m512i| match levels {
                Levels::Codebook { .. } => _mm512_shuffle_epi8(book, n),
                Levels::Offset8 => n,
            };
            let w_lo = bytes(_mm512_and_si512(v, m4));
            let w_hi = bytes(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            for r in 0..R {
                let at = a[r].add(8 * p);
                let a_lo = _mm512_set1_epi64(std::ptr::read_unaligned(at as *const i64));
                let a_hi = _mm512_set1_epi64(std::ptr::read_unaligned(at.add(16) as *const i64));
                acc[r] = _mm512_dpbusd_epi32(acc[r], w_lo, a_lo);
                if R == 1 {
                    second[r] = _mm512_dpbusd_epi32(second[r], w_hi, a_hi);
                } else {
                    acc[r] = _mm512_dpbusd_epi32(acc[r], w_hi, a_hi);
                }
            }
        }
        if R == 1 {
            acc[0] = _mm512_add_epi32(acc[0], second[0]);
        }
        acc
    }
}

/// The 64-bit pattern whose broadcast starts a sub-block's sums: `−bias · a_sum` in the
/// low (even) 32-bit half, 0 in the high one.
#[inline(always)]
fn bias_start(levels: &Levels, a_sum: i32) -> i64 {
    (a_sum.wrapping_mul(-levels.bias(true)) as u32) as i64
}

/// The biased codebook of `levels` in every 128-bit lane (zero for
/// [`Levels::Offset8`], which needs none).
#[inline(always)]
fn codebook(levels: &Levels) -> __m512i {
    let book = match levels {
        Levels::Codebook { biased, .. } => biased,
        Levels::Offset8 => &[0; 16],
    };
    // SAFETY: 16 readable bytes; called only from functions compiled with AVX-512 F.
    unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(book.as_ptr() as *const __m128i)) }
}

/// Writes each row's output: the two halves of its pair of lanes added.
#[inline(always)]
fn store_pairs<const R: usize>(acc: &[__m512; R], out: &mut [[f32; 8]]) {
    for (acc, out) in acc.iter().zip(out) {
        let mut lanes = [0f32; 16];
        // SAFETY: 16 writable f32s; called only from functions compiled with AVX-512 F.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *acc) };
        for (l, out) in out.iter_mut().enumerate() {
            *out = lanes[2 * l] + lanes[2 * l + 1];
        }
    }
}

/// The IQ4_NL or MXFP4 group product on 512-bit vectors (see `iq4::NibbleGroup`).
///
/// # Safety
///
/// The `GemmR8Fn` contract for a group of `F`'s records with `acts.len() >= R` and
/// `out.len() >= R`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn nibble_product<F: NibbleBlocks, const R: usize>(
    isa: Vnni<Avx512>,
    nb: usize,
    w: *const u8,
    acts: &[ActRow],
    out: &mut [[f32; 8]],
) {
    let book = codebook(&F::LEVELS);
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..nb {
        // SAFETY: record `b < nb` of the group and block `b` of each activation row, with
        // its scale and sum (the contract).
        unsafe {
            let record = w.add(b * F::RECORD);
            prefetch_record(isa.avx2(), record, F::RECORD.div_ceil(64));
            let mut a = [std::ptr::null::<u8>(); R];
            let mut start = [_mm512_setzero_si512(); R];
            for r in 0..R {
                let act = acts.get_unchecked(r);
                a[r] = act.blocks.add(b * Q8_0_BYTES + 2);
                start[r] = _mm512_set1_epi64(bias_start(&F::LEVELS, *act.sums.add(b)));
            }
            let sums = sub_block_sums(&F::LEVELS, book, record.add(F::QS), &a, start);
            let d = F::pair_scales(record);
            for r in 0..R {
                let da = _mm512_set1_ps(*acts.get_unchecked(r).scales.add(b));
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(sums[r]), acc[r]);
            }
        }
    }
    store_pairs(&acc, out);
}

/// The IQ4_XS group product on 512-bit vectors (see `iq4::Iq4XsGroup`): each sub-block's
/// sums scaled by the rows' `d · (ls − 32)` in f32 (exact integers below 2^24 before
/// that), the super-block's total by the activation's `d`.
///
/// # Safety
///
/// The `GemmR8Fn` contract for an IQ4_XS group with `acts.len() >= R` and
/// `out.len() >= R`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn xs_product<const R: usize>(
    isa: Vnni<Avx512>,
    nb: usize,
    w: *const u8,
    acts: &[ActRow],
    out: &mut [[f32; 8]],
) {
    let book = codebook(&IQ4_LEVELS);
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..nb {
        // SAFETY: record `b < nb` of the group and super-block `b` of each activation row
        // (the contract): every offset below lies inside them.
        unsafe {
            let record = w.add(b * XS_RECORD);
            let mut blocks = [std::ptr::null::<u8>(); R];
            // Per row the eight sub-blocks' starting patterns ([`bias_start`]) from the
            // pairs of `bsums`: `−128 · Σ a` zero-extended to 64 bits.
            let mut starts = [[0i64; 8]; R];
            for r in 0..R {
                blocks[r] = acts.get_unchecked(r).blocks.add(b * Q8K_BYTES);
                let bsums = blocks[r].add(Q8K_BSUMS);
                let sub_sums = _mm_hadd_epi16(
                    _mm_loadu_si128(bsums as *const __m128i),
                    _mm_loadu_si128(bsums.add(16) as *const __m128i),
                );
                let biases = _mm256_slli_epi32::<7>(_mm256_cvtepi16_epi32(sub_sums));
                let negated = _mm256_sub_epi32(_mm256_setzero_si256(), biases);
                _mm512_storeu_si512(
                    starts[r].as_mut_ptr() as *mut __m512i,
                    _mm512_cvtepu32_epi64(negated),
                );
            }
            let d = Iq4NlRecord::pair_scales(record);
            let mut part = [_mm512_setzero_ps(); R];
            for j in 0..8 {
                // The record's lines ahead, an eighth per sub-block.
                let eighth = record.add(XS_RECORD / 8 * j);
                prefetch_record(isa.avx2(), eighth, XS_RECORD.div_ceil(8 * 64));
                let mut a = [std::ptr::null::<u8>(); R];
                let mut start = [_mm512_setzero_si512(); R];
                for r in 0..R {
                    a[r] = blocks[r].add(Q8K_QS + 32 * j);
                    start[r] = _mm512_set1_epi64(starts[r][j]);
                }
                let runs = record.add(XS_QS + SUB_BLOCK_RUNS * j);
                let sums = sub_block_sums(&IQ4_LEVELS, book, runs, &a, start);
                // The rows' `d · (ls − 32)` of sub-block `j`, each in both lanes of its pair.
                let sc = _mm_loadl_epi64(record.add(XS_SCALES + 8 * j) as *const __m128i);
                let scales = _mm512_mul_ps(
                    d,
                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_unpacklo_epi8(sc, sc))),
                );
                for r in 0..R {
                    part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[r]), scales, part[r]);
                }
            }
            for r in 0..R {
                let da = _mm512_set1_ps(std::ptr::read_unaligned(blocks[r] as *const f32));
                acc[r] = _mm512_fmadd_ps(part[r], da, acc[r]);
            }
        }
    }
    store_pairs(&acc, out);
}
