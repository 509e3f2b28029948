//! The integer sums of one Q8_0 group record: eight weight rows of 32 signed quants
//! against one Q8_0 activation block, as eight i32 lanes in the record's scale order
//! (rows 0, 2, 4, 6, 1, 3, 5, 7), the order [`super::legacy`]'s kernel multiplies the
//! scales in. Three versions, each a pair of functions: one that loads (and prepares) the
//! record's weight quants once, one that sums them against an activation block (called
//! once per activation row); [`super::super::IntDots`] picks the pair:
//!
//! - AVX2: the rows as stored; `maddubs` of `|w|` with the activation's bytes given `w`'s
//!   signs, then `madd`.
//! - AVX-VNNI (256-bit): the weights biased to unsigned at load (`w ^ 0x80 = w + 128`),
//!   one `vpdpbusd` per row, less `128 · Σ a` (the activation block's sum, precomputed).
//! - AVX-512 VNNI on 512-bit vectors: two rows per register (rows `2p` and `2p + 1` are
//!   64 contiguous bytes of the record), one `vpdpbusd` per row pair.

use std::arch::x86_64::*;

use super::super::IntDots;
use super::super::int_dots::Vnni;
use super::super::vectors::load;
use crate::x86::{Avx2, Avx512};

// SAFETY (for every `unsafe` block below whose comment names only pointers): the token
// each function takes proves the features of the intrinsics it calls.

/// The eight per-row vectors `s[r]` (eight i32 partial sums of row `r` each) folded to
/// one vector in scale order: halves of row pairs added (lanes 0..4 row `2p`, 4..8 row
/// `2p + 1`), then the two-level `hadd` tree of [`fold_pairs`].
#[inline(always)]
fn fold_rows(s: Avx2, rows: [__m256i; 8]) -> __m256i {
    let mut t = [rows[0]; 4];
    for (p, t) in t.iter_mut().enumerate() {
        let (lo, hi) = (rows[2 * p], rows[2 * p + 1]);
        // SAFETY: the token proves AVX2.
        *t = unsafe {
            _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(lo, hi),
                _mm256_permute2x128_si256::<0x31>(lo, hi),
            )
        };
    }
    fold_pairs(s, t)
}

/// Four row-pair vectors (lanes 0..4 partial sums of row `2p`, 4..8 of row `2p + 1`)
/// folded to the eight row sums in scale order.
#[inline(always)]
fn fold_pairs(_: Avx2, t: [__m256i; 4]) -> __m256i {
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_hadd_epi32(_mm256_hadd_epi32(t[0], t[1]), _mm256_hadd_epi32(t[2], t[3])) }
}

/// The eight row sums (scale order) of a record's rows as stored (32 quants each, one
/// vector per row) against the 32 activation quants at `a`.
///
/// # Safety
///
/// 32 readable bytes at `a`.
#[inline(always)]
pub(in crate::quantized::x86) unsafe fn signed(
    s: Avx2,
    rows: [__m256i; 8],
    a: *const u8,
) -> __m256i {
    // SAFETY: 32 readable bytes at `a`.
    let y = unsafe { _mm256_loadu_si256(a as *const __m256i) };
    let mut sums = rows;
    for w in sums.iter_mut() {
        // SAFETY: the token proves AVX2.
        *w = unsafe {
            let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(*w, *w), _mm256_sign_epi8(y, *w));
            _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
        };
    }
    fold_rows(s, sums)
}

/// The record's eight rows at `q` biased to unsigned bytes (`w + 128`) for `vpdpbusd`.
///
/// # Safety
///
/// 256 readable bytes at `q`.
#[inline(always)]
pub(in crate::quantized::x86) unsafe fn rows_biased(s: Avx2, q: *const u8) -> [__m256i; 8] {
    // SAFETY: 256 readable bytes at `q`.
    let mut rows = unsafe { load::<8>(s, q) };
    for w in rows.iter_mut() {
        // SAFETY: the token proves AVX2.
        *w = unsafe { _mm256_xor_si256(*w, _mm256_set1_epi8(i8::MIN)) };
    }
    rows
}

/// The eight row sums (scale order) of [`rows_biased`]'s rows against the 32 activation
/// quants at `a` whose sum is `a_sum`, with AVX-VNNI.
///
/// # Safety
///
/// 32 readable bytes at `a`.
#[inline(always)]
pub(in crate::quantized::x86) unsafe fn biased(
    isa: Vnni<Avx2>,
    rows: [__m256i; 8],
    a: *const u8,
    a_sum: i32,
) -> __m256i {
    // SAFETY: 32 readable bytes at `a`.
    let y = unsafe { _mm256_loadu_si256(a as *const __m256i) };
    let mut sums = rows;
    for w in sums.iter_mut() {
        // SAFETY: the token proves AVX.
        *w = isa.dpbusd(unsafe { _mm256_setzero_si256() }, *w, y);
    }
    let s = isa.avx2();
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_sub_epi32(fold_rows(s, sums), _mm256_set1_epi32(128 * a_sum)) }
}

/// The record's eight rows at `q` as four 512-bit row pairs, biased to unsigned bytes.
///
/// # Safety
///
/// 256 readable bytes at `q`.
#[inline(always)]
pub(in crate::quantized::x86) unsafe fn row_pairs_biased(
    _: Vnni<Avx512>,
    q: *const u8,
) -> [__m512i; 4] {
    // SAFETY: the token proves AVX-512 F.
    let mut pairs = [unsafe { _mm512_setzero_si512() }; 4];
    for (p, pair) in pairs.iter_mut().enumerate() {
        // SAFETY: 256 readable bytes at `q`; the token proves AVX-512 F.
        *pair = unsafe {
            _mm512_xor_si512(
                _mm512_loadu_si512(q.add(64 * p) as *const __m512i),
                _mm512_set1_epi8(i8::MIN),
            )
        };
    }
    pairs
}

/// The eight row sums (scale order) of [`row_pairs_biased`]'s row pairs against the 32
/// activation quants at `a` whose sum is `a_sum`, with 512-bit `vpdpbusd`.
///
/// # Safety
///
/// 32 readable bytes at `a`.
#[inline(always)]
pub(in crate::quantized::x86) unsafe fn row_pairs(
    isa: Vnni<Avx512>,
    pairs: [__m512i; 4],
    a: *const u8,
    a_sum: i32,
) -> __m256i {
    // SAFETY: 32 readable bytes at `a`; the token proves AVX-512 F and VNNI.
    let t = unsafe {
        let y = _mm512_broadcast_i64x4(_mm256_loadu_si256(a as *const __m256i));
        // 128-bit chunks of `s[p]`: 0, 1 row 2p; 2, 3 row 2p + 1.
        let mut s = pairs;
        for w in s.iter_mut() {
            *w = _mm512_dpbusd_epi32(_mm512_setzero_si512(), *w, y);
        }
        let (lo, hi) = (quad(isa, s[0], s[1]), quad(isa, s[2], s[3]));
        [
            _mm512_castsi512_si256(lo),
            _mm512_extracti64x4_epi64::<1>(lo),
            _mm512_castsi512_si256(hi),
            _mm512_extracti64x4_epi64::<1>(hi),
        ]
    };
    let s = isa.avx2();
    // SAFETY: the token proves AVX2.
    unsafe { _mm256_sub_epi32(fold_pairs(s, t), _mm256_set1_epi32(128 * a_sum)) }
}

/// The chunk halves of two row-pair sums added: `[row 4q, row 4q + 1, row 4q + 2,
/// row 4q + 3]` in 128-bit chunks.
#[inline(always)]
fn quad(_: Vnni<Avx512>, a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: the token proves AVX-512 F.
    unsafe {
        _mm512_add_epi32(
            _mm512_shuffle_i32x4::<0x88>(a, b),
            _mm512_shuffle_i32x4::<0xDD>(a, b),
        )
    }
}
