//! The Q4_K and Q5_K group products (records in `crate::interleaved::q4_k` and
//! `crate::interleaved::q5_k`): every 32-bit lane belongs to one of the group's eight
//! rows throughout. Each 32-byte load holds four quant bytes of each row; a step
//! multiplies it against a four-byte activation run broadcast to all lanes, eight steps
//! finish a sub-block for all eight rows, scaled once by the rows' scales. No shuffle per
//! sub-block and no horizontal sums: about 270 vector operations per record against 350
//! for the row-pair arrangement this replaced. A step's levels come from the nibbles
//! (Q4_K) or the nibbles and the fifth bits (Q5_K). Two arithmetics:
//!
//! - AVX2: a step's `maddubs` (u8 × i8 pairs → i16) is added in 16 bits (a 32-value
//!   sub-block reaches at most 8 · 2 · 15 · 128 = 30720), and one `madd` per sub-block
//!   with the rows' scales, each byte doubled to fill a lane's two 16-bit halves,
//!   widens to i32. Q5_K levels reach 31, so its sub-block sums stay in two 16-bit
//!   partials of four steps (8 · 2 · 31 · 128 would overflow), each scaled on its own.
//! - VNNI: a step's `vpdpbusd` adds four products straight into the i32 lane, and the
//!   sub-block ends with one `vpmulld` by the rows' scales widened to 32 bits: two fewer
//!   instructions per step (no `maddubs` + add pair), one more per sub-block.

use std::arch::x86_64::*;

use super::super::vectors::{prefetch_record, store_lanes};
use super::super::{GroupProduct, IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use crate::interleaved::q4_k::{D, DMIN, MINS, SCALES};
use crate::interleaved::{InterleavedLayout, q4_k, q5_k};
use crate::quantized::kernels::ActRow;
use crate::x86::Avx2;

/// A record with Q4_K's scheme: where its steps' levels come from.
pub(in crate::quantized::x86) trait K4Record {
    /// The layout.
    const LAYOUT: InterleavedLayout;
    /// Whether eight AVX2 steps of its levels would overflow 16-bit sums (Q5_K).
    const WIDE_LEVELS: bool;

    /// Step `k` of chunk `j`: the levels of sub-block `2j` and of `2j + 1`.
    ///
    /// # Safety
    ///
    /// `record` is a readable record of the layout.
    unsafe fn levels(s: Avx2, record: *const u8, j: usize, k: usize) -> (__m256i, __m256i);
}

/// Q4_K records: the steps' nibbles.
pub(in crate::quantized::x86) struct Q4K;

impl K4Record for Q4K {
    const LAYOUT: InterleavedLayout = InterleavedLayout::Q4KR8;
    const WIDE_LEVELS: bool = false;

    /// The low nibbles (sub-block `2j`) and the high nibbles (`2j + 1`) of the step's 32
    /// quant bytes.
    #[inline(always)]
    unsafe fn levels(_: Avx2, record: *const u8, j: usize, k: usize) -> (__m256i, __m256i) {
        // SAFETY: 32 bytes inside the record; the token proves AVX2.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let v = _mm256_loadu_si256(record.add(q4_k::qs_offset(j, k)) as *const __m256i);
            (
                _mm256_and_si256(v, m4),
                _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
            )
        }
    }
}

/// Q5_K records: the steps' nibbles with their fifth bits.
pub(in crate::quantized::x86) struct Q5K;

impl K4Record for Q5K {
    const LAYOUT: InterleavedLayout = InterleavedLayout::Q5KR8;
    const WIDE_LEVELS: bool = true;

    /// [`Q4K::levels`]' nibbles with the fifth bits (bits `2j` and `2j + 1` of the
    /// step's `qh` run) moved to bit 4.
    #[inline(always)]
    unsafe fn levels(_: Avx2, record: *const u8, j: usize, k: usize) -> (__m256i, __m256i) {
        // SAFETY: 32 bytes each inside the record; the token proves AVX2.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let bit4 = _mm256_set1_epi8(0x10);
            let v = _mm256_loadu_si256(record.add(q5_k::qs_offset(j, k)) as *const __m256i);
            let h = _mm256_loadu_si256(record.add(q5_k::qh_offset(k)) as *const __m256i);
            // Bits 2j and 2j + 1 down to bits 0 and 1 of their own byte (a 16-bit shift by
            // at most 6 moves the high byte's bits only into the low byte's bits 2.. and
            // up, which the masks below drop), then to bit 4.
            let h = _mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * j as i32));
            (
                _mm256_or_si256(
                    _mm256_and_si256(v, m4),
                    _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                    _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4),
                ),
            )
        }
    }
}

/// A chunk's scale bytes (eight rows of sub-block `2j`, then of `2j + 1`) as the
/// sub-block sums take them: 16-bit pairs `(s, s)` per lane for AVX2's `madd`, one i32
/// per lane for VNNI's `vpmulld`.
#[inline(always)]
fn chunk_scales<I: IntDots>(_: I, sc: __m128i) -> (__m256i, __m256i) {
    // SAFETY: every token proves AVX2.
    unsafe {
        if I::VNNI {
            (
                _mm256_cvtepu8_epi32(sc),
                _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(sc)),
            )
        } else {
            (
                _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc)),
                _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sc, sc)),
            )
        }
    }
}

/// `acc` plus one step's u8 × i8 products: `vpdpbusd` into i32 lanes, or on AVX2
/// `maddubs` added in 16 bits (also the ternary records' step).
#[inline(always)]
pub(super) fn step<I: IntDots>(isa: I, acc: __m256i, q: __m256i, a: __m256i) -> __m256i {
    if I::VNNI {
        isa.dpbusd(acc, q, a)
    } else {
        // SAFETY: every token proves AVX2.
        unsafe { _mm256_add_epi16(acc, _mm256_maddubs_epi16(q, a)) }
    }
}

/// The two sub-blocks' sums (each as the partial sums of even and odd steps) times their
/// scales, in i32 lanes: with VNNI the partials joined in 32 bits and one `vpmulld`
/// each; on AVX2 joined in 16 bits and one `madd` each, or (`apart`: Q5_K's wide
/// levels) each partial scaled on its own and joined in 32 bits.
#[inline(always)]
fn join<I: IntDots>(
    _: I,
    lo: [__m256i; 2],
    sc_lo: __m256i,
    hi: [__m256i; 2],
    sc_hi: __m256i,
    apart: bool,
) -> __m256i {
    // SAFETY: every token proves AVX2.
    unsafe {
        if I::VNNI {
            _mm256_add_epi32(
                _mm256_mullo_epi32(_mm256_add_epi32(lo[0], lo[1]), sc_lo),
                _mm256_mullo_epi32(_mm256_add_epi32(hi[0], hi[1]), sc_hi),
            )
        } else if apart {
            let even = _mm256_add_epi32(
                _mm256_madd_epi16(lo[0], sc_lo),
                _mm256_madd_epi16(hi[0], sc_hi),
            );
            let odd = _mm256_add_epi32(
                _mm256_madd_epi16(lo[1], sc_lo),
                _mm256_madd_epi16(hi[1], sc_hi),
            );
            _mm256_add_epi32(even, odd)
        } else {
            let (l, h) = (
                _mm256_add_epi16(lo[0], lo[1]),
                _mm256_add_epi16(hi[0], hi[1]),
            );
            _mm256_add_epi32(_mm256_madd_epi16(l, sc_lo), _mm256_madd_epi16(h, sc_hi))
        }
    }
}

/// The group product of the Q4_K-scheme record `F`.
pub(in crate::quantized::x86) struct K4Group<F>(F);

impl<F: K4Record> GroupProduct for K4Group<F> {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        let s = isa.avx2();
        let record_bytes = F::LAYOUT.record_bytes();
        // The steps go to two partials (even and odd steps) at one activation row (two
        // dependency chains: `vpdpbusd` has a 5-cycle latency), and at every row count
        // where eight AVX2 steps would overflow 16-bit sums. More rows interleave their
        // own chains; a second set would spill registers (four rows ran much slower).
        let split = (F::WIDE_LEVELS && !I::VNNI) || R == 1;
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group (the `GemmR8Fn` contract).
            let record = unsafe { w.add(b * record_bytes) };
            let mut a = [std::ptr::null::<u8>(); R];
            for (r, a) in a.iter_mut().enumerate() {
                // SAFETY: super-block `b` of each activation row (the contract).
                *a = unsafe { acts.get_unchecked(r).blocks.add(b * Q8K_BYTES) };
            }
            // SAFETY: the record and the activation blocks are readable (above).
            let sums = unsafe { record_sums::<I, F, R>(isa, record, &a, split) };
            // SAFETY: as above; the token proves AVX2, FMA and F16C.
            unsafe {
                let mins = min_sums::<I, R>(isa, record, &a);
                let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
                let dmin = _mm256_cvtph_ps(_mm_loadu_si128(record.add(DMIN) as *const __m128i));
                for r in 0..R {
                    let da = _mm256_set1_ps(std::ptr::read_unaligned(a[r] as *const f32));
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(sums[r]), acc[r]);
                    acc[r] = _mm256_fnmadd_ps(
                        _mm256_mul_ps(dmin, da),
                        _mm256_cvtepi32_ps(mins[r]),
                        acc[r],
                    );
                }
            }
        }
        store_lanes(s, &acc, out);
    }
}

/// Each row's scaled sub-block sums of one record against the Q8_K blocks at `a`: per
/// 64-value chunk eight steps of 4 values per row, then the two sub-blocks' scales
/// applied once for the eight rows (lane `l` of every vector is row `l`).
///
/// # Safety
///
/// `record` is a readable record of `F::LAYOUT` and each `a[r]` a readable Q8_K block.
#[inline(always)]
unsafe fn record_sums<I: IntDots, F: K4Record, const R: usize>(
    isa: I,
    record: *const u8,
    a: &[*const u8; R],
    split: bool,
) -> [__m256i; R] {
    let s = isa.avx2();
    let record_bytes = F::LAYOUT.record_bytes();
    // SAFETY: the token proves AVX.
    let zero = unsafe { _mm256_setzero_si256() };
    let mut sums = [zero; R];
    for j in 0..4 {
        // The record's lines ahead, a quarter per chunk (Q4_K: five of 19): as one burst
        // of 19 at the record's start they filled the miss queue and the stream ran at
        // the sum of compute and memory time; spread out, the memory time hides behind
        // the compute (both the GEMV from memory and Q4_K_M decode gained).
        // SAFETY: the chunk's quarter lies inside the record (the contract).
        let quarter = unsafe { record.add(record_bytes / 4 * j) };
        prefetch_record(s, quarter, record_bytes.div_ceil(4 * 64));
        // SAFETY: the chunk's 16 scale bytes inside the record; the token proves SSE2.
        let sc = unsafe { _mm_loadu_si128(record.add(SCALES + 16 * j) as *const __m128i) };
        let (sc_lo, sc_hi) = chunk_scales(isa, sc);
        let mut lo = [[zero; R]; 2];
        let mut hi = [[zero; R]; 2];
        for k in 0..8 {
            // SAFETY: step `k` of chunk `j` lies inside the record.
            let (q_lo, q_hi) = unsafe { F::levels(s, record, j, k) };
            for r in 0..R {
                // SAFETY: values `64j + 4k ..` and `64j + 32 + 4k ..` of the Q8_K block.
                let (a_lo, a_hi) = unsafe {
                    let at = a[r].add(Q8K_QS + 64 * j + 4 * k);
                    (
                        _mm256_set1_epi32(std::ptr::read_unaligned(at as *const i32)),
                        _mm256_set1_epi32(std::ptr::read_unaligned(at.add(32) as *const i32)),
                    )
                };
                let h = if split { k % 2 } else { 0 };
                lo[h][r] = step(isa, lo[h][r], q_lo, a_lo);
                hi[h][r] = step(isa, hi[h][r], q_hi, a_hi);
            }
        }
        for r in 0..R {
            let joined = join(
                isa,
                [lo[0][r], lo[1][r]],
                sc_lo,
                [hi[0][r], hi[1][r]],
                sc_hi,
                F::WIDE_LEVELS,
            );
            // SAFETY: the token proves AVX2.
            sums[r] = unsafe { _mm256_add_epi32(sums[r], joined) };
        }
    }
    sums
}

/// Each row's `Σ m · S` of one record: the rows' mins against the activation's
/// sub-block sums (pairs of the 16-value `bsums`). Per chunk, the rows' `(m[2j],
/// m[2j + 1])` pairs `madd` the activation's `(S[2j], S[2j + 1])` broadcast to every
/// lane ([`IntDots::dpwssd`]).
///
/// # Safety
///
/// `record` is a readable Q4_K or Q5_K record and each `a[r]` a readable Q8_K block.
#[inline(always)]
unsafe fn min_sums<I: IntDots, const R: usize>(
    isa: I,
    record: *const u8,
    a: &[*const u8; R],
) -> [__m256i; R] {
    // SAFETY: the `bsums` of each Q8_K block and the record's mins (the contract); the
    // token proves AVX2.
    unsafe {
        let mut sub_sums = [_mm256_setzero_si256(); R];
        for (r, sub) in sub_sums.iter_mut().enumerate() {
            let bsums = a[r].add(Q8K_BSUMS);
            *sub = _mm256_broadcastsi128_si256(_mm_hadd_epi16(
                _mm_loadu_si128(bsums as *const __m128i),
                _mm_loadu_si128(bsums.add(16) as *const __m128i),
            ));
        }
        let mut mins = [_mm256_setzero_si256(); R];
        for j in 0..4 {
            let m =
                _mm256_cvtepu8_epi16(_mm_loadu_si128(record.add(MINS + 16 * j) as *const __m128i));
            for r in 0..R {
                let s = match j {
                    0 => _mm256_shuffle_epi32::<0x00>(sub_sums[r]),
                    1 => _mm256_shuffle_epi32::<0x55>(sub_sums[r]),
                    2 => _mm256_shuffle_epi32::<0xAA>(sub_sums[r]),
                    _ => _mm256_shuffle_epi32::<0xFF>(sub_sums[r]),
                };
                mins[r] = isa.dpwssd(mins[r], m, s);
            }
        }
        mins
    }
}
