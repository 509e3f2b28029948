//! The IQ4_NL and IQ4_XS group products (records in `crate::interleaved::iq4`). A run's
//! quant bytes become the rows' levels by one byte shuffle through the codebook per
//! nibble half, once per record for every activation row; each run then meets the
//! activation's 8-byte run broadcast to every 64-bit lane, so a row's partial sums
//! gather in its lane's two halves. No shuffle per activation row. With AVX-512 BW and
//! VNNI, the 512-bit products of `iq4_wide.rs` run instead (a whole run per vector).
//! Here, on 256-bit vectors (four rows per vector, two vectors per run), the two
//! halves of each row are folded once per sub-block by one `hadd` and one permute, which
//! leave the eight rows in order. Two arithmetics:
//!
//! - VNNI: the codebook biased to unsigned bytes (`level + 128`, 1..=241), one
//!   `vpdpbusd` per vector into i32 lanes, less `128 · Σ a` per sub-block (the
//!   activation's sums: Q8_0's per-block sums, Q8_K's `bsums`).
//! - AVX2: the signed levels; each product is `maddubs` of `|level|` with the activation
//!   bytes given the levels' signs, then `madd` (a pair of products reaches at most
//!   2 · 127 · 127, within 16 bits; two pairs would not be).
//!
//! The sub-block sums are exact integers; IQ4_NL scales each block's sums in f32 (one
//! FMA per block, as Q4_0), IQ4_XS multiplies them by the rows' 6-bit scales in i32
//! (`vpmulld`) and converts once per super-block (one FMA per 256 values).

use std::arch::x86_64::*;

use tempra_tensor::quant::iq_grids::KVALUES_IQ4NL;

use super::super::vectors::{prefetch_record, store_lanes};
use super::super::{GroupProduct, IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use super::iq4_wide;
use crate::interleaved::iq4::{D, NL_QS, NL_RECORD, SUB_BLOCK_RUNS, XS_QS, XS_RECORD, XS_SCALES};
use crate::quantized::kernels::ActRow;

/// Bytes of a Q8_0 activation block.
pub(super) const Q8_0_BYTES: usize = 34;

/// IQ4_NL's codebook biased to unsigned bytes (`level + 128`) for `vpdpbusd`.
pub(super) const BIASED_LEVELS: [i8; 16] = {
    let mut biased = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        biased[i] = (KVALUES_IQ4NL[i] as i16 + 128) as u8 as i8;
        i += 1;
    }
    biased
};

/// The codebook a run's nibbles index, in both 128-bit halves (for `pshufb`): biased
/// for VNNI, signed for AVX2.
#[inline(always)]
fn codebook<I: IntDots>(_: I) -> __m256i {
    let levels = if I::VNNI {
        &BIASED_LEVELS
    } else {
        &KVALUES_IQ4NL
    };
    // SAFETY: every token proves AVX2; 16 readable bytes.
    unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(levels.as_ptr() as *const __m128i)) }
}

/// `acc` plus the products of `w` (levels as [`codebook`] gives them) and `a`
/// (activation bytes), in i32 lanes.
#[inline(always)]
fn products<I: IntDots>(isa: I, acc: __m256i, w: __m256i, a: __m256i) -> __m256i {
    if I::VNNI {
        isa.dpbusd(acc, w, a)
    } else {
        // SAFETY: every token proves AVX2.
        let (magnitude, signed_a) = unsafe { (_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)) };
        isa.dpbusd(acc, magnitude, signed_a)
    }
}

/// Each row's `Σ level · a` over one 32-value sub-block (eight i32 lanes, rows in order):
/// the two runs at `q` against the 32 activation quants at each `a[r]` (with VNNI
/// biased: `+ 128 · Σ a`).
///
/// # Safety
///
/// 128 readable bytes at `q`, 32 at each `a[r]`.
#[inline(always)]
unsafe fn sub_block_sums<I: IntDots, const R: usize>(
    isa: I,
    book: __m256i,
    q: *const u8,
    a: &[*const u8; R],
) -> [__m256i; R] {
    // SAFETY: the token proves AVX2.
    let (zero, m4) = unsafe { (_mm256_setzero_si256(), _mm256_set1_epi8(0x0F)) };
    // `acc[h][r]`: rows `4h .. 4h + 4`, row `4h + l` in 32-bit lanes `2l` and `2l + 1`.
    let mut acc = [[zero; R]; 2];
    for p in 0..2 {
        for (h, acc) in acc.iter_mut().enumerate() {
            // SAFETY: half `h` of run `p` at `q`; the token proves AVX2.
            let (w_lo, w_hi) = unsafe {
                let v = _mm256_loadu_si256(q.add(64 * p + 32 * h) as *const __m256i);
                (
                    _mm256_shuffle_epi8(book, _mm256_and_si256(v, m4)),
                    _mm256_shuffle_epi8(book, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4)),
                )
            };
            for r in 0..R {
                // SAFETY: values `8p ..` and `16 + 8p ..` of the sub-block at `a[r]`.
                let (a_lo, a_hi) = unsafe {
                    let at = a[r].add(8 * p);
                    (
                        _mm256_set1_epi64x(std::ptr::read_unaligned(at as *const i64)),
                        _mm256_set1_epi64x(std::ptr::read_unaligned(at.add(16) as *const i64)),
                    )
                };
                acc[r] = products(isa, acc[r], w_lo, a_lo);
                acc[r] = products(isa, acc[r], w_hi, a_hi);
            }
        }
    }
    let mut sums = acc[0];
    for (r, sums) in sums.iter_mut().enumerate() {
        // `hadd` leaves rows (0, 1), (4, 5) in the low lane and (2, 3), (6, 7) in the
        // high one; the permute puts the four pairs in order.
        // SAFETY: the token proves AVX2.
        *sums =
            unsafe { _mm256_permute4x64_epi64::<0xD8>(_mm256_hadd_epi32(acc[0][r], acc[1][r])) };
    }
    sums
}

/// `sums` less the VNNI bias `128 · Σ a` (the activation sub-block's sum `a_sum`); as
/// they are on AVX2.
#[inline(always)]
fn unbiased<I: IntDots>(_: I, sums: __m256i, a_sum: i32) -> __m256i {
    if I::VNNI {
        // SAFETY: every token proves AVX2.
        unsafe { _mm256_sub_epi32(sums, _mm256_set1_epi32(128 * a_sum)) }
    } else {
        sums
    }
}

/// The IQ4_NL group product (against Q8_0 activation rows with their block scales and
/// sums).
pub(in crate::quantized::x86) struct Iq4NlGroup;

impl GroupProduct for Iq4NlGroup {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        if let Some(wide) = isa.avx512_vnni() {
            // SAFETY: the caller's contract; the token proves AVX-512 BW and VNNI.
            return unsafe { iq4_wide::nl_product::<R>(wide, nb, w, acts, out) };
        }
        let s = isa.avx2();
        let book = codebook(isa);
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group (the `GemmR8Fn` contract).
            let record = unsafe { w.add(b * NL_RECORD) };
            prefetch_record(s, record, NL_RECORD.div_ceil(64));
            let mut a = [std::ptr::null::<u8>(); R];
            for (r, a) in a.iter_mut().enumerate() {
                // SAFETY: block `b` of each activation row (the contract).
                *a = unsafe { acts.get_unchecked(r).blocks.add(b * Q8_0_BYTES + 2) };
            }
            // SAFETY: the record's runs and the blocks' quants are readable (above).
            let sums = unsafe { sub_block_sums(isa, book, record.add(NL_QS), &a) };
            // SAFETY: the record's scales, and block `b`'s scale and sum of each row (the
            // contract); the token proves AVX2, FMA and F16C.
            unsafe {
                let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
                for r in 0..R {
                    let act = acts.get_unchecked(r);
                    let sums = unbiased(isa, sums[r], *act.sums.add(b));
                    let da = _mm256_set1_ps(*act.scales.add(b));
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(sums), acc[r]);
                }
            }
        }
        store_lanes(s, &acc, out);
    }
}

/// The IQ4_XS group product (against Q8_K activation rows).
pub(in crate::quantized::x86) struct Iq4XsGroup;

impl GroupProduct for Iq4XsGroup {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        if let Some(wide) = isa.avx512_vnni() {
            // SAFETY: the caller's contract; the token proves AVX-512 BW and VNNI.
            return unsafe { iq4_wide::xs_product::<R>(wide, nb, w, acts, out) };
        }
        let s = isa.avx2();
        let book = codebook(isa);
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group (the `GemmR8Fn` contract).
            let record = unsafe { w.add(b * XS_RECORD) };
            let mut blocks = [std::ptr::null::<u8>(); R];
            for (r, block) in blocks.iter_mut().enumerate() {
                // SAFETY: super-block `b` of each activation row (the contract).
                *block = unsafe { acts.get_unchecked(r).blocks.add(b * Q8K_BYTES) };
            }
            // SAFETY: the token proves AVX.
            let mut total = [unsafe { _mm256_setzero_si256() }; R];
            for j in 0..8 {
                // The record's lines ahead, an eighth per sub-block (spread out, as Q4_K's).
                // SAFETY: the eighth lies inside the record.
                let eighth = unsafe { record.add(XS_RECORD / 8 * j) };
                prefetch_record(s, eighth, XS_RECORD.div_ceil(8 * 64));
                let mut a = [std::ptr::null::<u8>(); R];
                for r in 0..R {
                    // SAFETY: sub-block `j`'s quants inside each Q8_K block.
                    a[r] = unsafe { blocks[r].add(Q8K_QS + 32 * j) };
                }
                // SAFETY: sub-block `j`'s runs inside the record, its quants at `a`.
                let sums = unsafe {
                    sub_block_sums(isa, book, record.add(XS_QS + SUB_BLOCK_RUNS * j), &a)
                };
                // SAFETY: the sub-block's eight scale bytes inside the record, and the two
                // 16-value sums of each Q8_K block; the token proves AVX2.
                unsafe {
                    let scales = _mm256_cvtepi8_epi32(_mm_loadl_epi64(
                        record.add(XS_SCALES + 8 * j) as *const __m128i,
                    ));
                    for r in 0..R {
                        let bsums = blocks[r].add(Q8K_BSUMS + 4 * j) as *const i16;
                        let a_sum = std::ptr::read_unaligned(bsums) as i32
                            + std::ptr::read_unaligned(bsums.add(1)) as i32;
                        let sums = unbiased(isa, sums[r], a_sum);
                        total[r] = _mm256_add_epi32(total[r], _mm256_mullo_epi32(sums, scales));
                    }
                }
            }
            // SAFETY: the record's scales and each Q8_K block's `d`; the token proves AVX2,
            // FMA and F16C.
            unsafe {
                let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
                for r in 0..R {
                    let da = _mm256_set1_ps(std::ptr::read_unaligned(blocks[r] as *const f32));
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(total[r]), acc[r]);
                }
            }
        }
        store_lanes(s, &acc, out);
    }
}
