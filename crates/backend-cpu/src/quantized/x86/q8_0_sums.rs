//! The integer sums of one Q8_0R8 block column: eight weight rows of 32 signed quants
//! against one Q8_0 activation block, as eight i32 lanes in the layout's scale order
//! (rows 0, 2, 4, 6, 1, 3, 5, 7), the order [`super::interleaved`]'s kernel multiplies
//! the scales in. Three versions, each a pair of functions: one that loads (and
//! prepares) the record's weight quants once, one that sums them against an activation
//! block (called once per activation row):
//!
//! - AVX2: the rows as stored; `maddubs` of `|w|` with the activation's bytes given `w`'s
//!   signs, then `madd`.
//! - AVX-VNNI (256-bit): the weights biased to unsigned at load (`w ^ 0x80 = w + 128`),
//!   one `vpdpbusd` per row, less `128 · Σ a` (the activation block's sum, precomputed).
//! - AVX-512 VNNI on 512-bit vectors: two rows per register (rows `2p` and `2p + 1` are
//!   64 contiguous bytes of the record), one `vpdpbusd` per row pair.

use std::arch::x86_64::*;

/// The eight per-row vectors `s[r]` (eight i32 partial sums of row `r` each) folded to
/// one vector in scale order: halves of row pairs added (lanes 0..4 row `2p`, 4..8 row
/// `2p + 1`), then the two-level `hadd` tree of the Q4_0R8 sums.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn fold_rows(s: [__m256i; 8]) -> __m256i {
    let pair = |lo: __m256i, hi: __m256i| {
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(lo, hi),
            _mm256_permute2x128_si256::<0x31>(lo, hi),
        )
    };
    let t: [__m256i; 4] = std::array::from_fn(|p| pair(s[2 * p], s[2 * p + 1]));
    fold_pairs(t)
}

/// Four row-pair vectors (lanes 0..4 partial sums of row `2p`, 4..8 of row `2p + 1`)
/// folded to the eight row sums in scale order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn fold_pairs(t: [__m256i; 4]) -> __m256i {
    _mm256_hadd_epi32(_mm256_hadd_epi32(t[0], t[1]), _mm256_hadd_epi32(t[2], t[3]))
}

/// The eight row sums (scale order) of a record's rows as stored (32 quants each, one
/// vector per row: `load_vectors::<8>`) against the 32 activation quants at `a`
/// (`_a_sum` unused: no bias to take out).
///
/// # Safety
///
/// 32 readable bytes at `a`; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn sums_avx2(rows: [__m256i; 8], a: *const u8, _a_sum: i32) -> __m256i {
    // SAFETY: 32 readable bytes at `a`.
    let y = unsafe { _mm256_loadu_si256(a as *const __m256i) };
    let ones = _mm256_set1_epi16(1);
    let s = rows.map(|w| {
        let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
        _mm256_madd_epi16(pairs, ones)
    });
    fold_rows(s)
}

/// The record's eight rows at `q` biased to unsigned bytes (`w + 128`) for `vpdpbusd`.
///
/// # Safety
///
/// 256 readable bytes at `q`; AVX2 present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_biased(q: *const u8) -> [__m256i; 8] {
    let bias = _mm256_set1_epi8(i8::MIN);
    // SAFETY: 256 readable bytes at `q`.
    unsafe { super::load_vectors::<8>(q) }.map(|w| _mm256_xor_si256(w, bias))
}

/// The eight row sums (scale order) of [`rows_biased`]'s rows against the 32
/// activation quants at `a` whose sum is `a_sum`, with AVX-VNNI.
///
/// # Safety
///
/// 32 readable bytes at `a`; AVX2 and AVX-VNNI present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(super) unsafe fn sums_avx_vnni(rows: [__m256i; 8], a: *const u8, a_sum: i32) -> __m256i {
    // SAFETY: 32 readable bytes at `a`.
    let y = unsafe { _mm256_loadu_si256(a as *const __m256i) };
    let s = rows.map(|w| super::vnni::dpbusd_avx(_mm256_setzero_si256(), w, y));
    _mm256_sub_epi32(fold_rows(s), _mm256_set1_epi32(128 * a_sum))
}

/// The record's eight rows at `q` as four 512-bit row pairs, biased to unsigned bytes.
///
/// # Safety
///
/// 256 readable bytes at `q`; AVX-512 F present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn row_pairs_biased(q: *const u8) -> [__m512i; 4] {
    let bias = _mm512_set1_epi8(i8::MIN);
    // SAFETY: 256 readable bytes at `q`.
    std::array::from_fn(|p| unsafe {
        _mm512_xor_si512(_mm512_loadu_si512(q.add(64 * p) as *const __m512i), bias)
    })
}

/// The eight row sums (scale order) of [`row_pairs_biased`]'s row pairs against the 32
/// activation quants at `a` whose sum is `a_sum`, with 512-bit `vpdpbusd`.
///
/// # Safety
///
/// 32 readable bytes at `a`; AVX-512 F, BW and VNNI present.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn sums_avx512_vnni(pairs: [__m512i; 4], a: *const u8, a_sum: i32) -> __m256i {
    // SAFETY: 32 readable bytes at `a`.
    let y = _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(a as *const __m256i) });
    // 128-bit chunks of `s[p]`: 0, 1 row 2p; 2, 3 row 2p + 1.
    let s = pairs.map(|w| _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, y));
    // Chunk halves of each row added: [row 4q, row 4q + 1, row 4q + 2, row 4q + 3].
    let quad = |a: __m512i, b: __m512i| {
        _mm512_add_epi32(
            _mm512_shuffle_i32x4::<0x88>(a, b),
            _mm512_shuffle_i32x4::<0xDD>(a, b),
        )
    };
    let (lo, hi) = (quad(s[0], s[1]), quad(s[2], s[3]));
    let t = [
        _mm512_castsi512_si256(lo),
        _mm512_extracti64x4_epi64::<1>(lo),
        _mm512_castsi512_si256(hi),
        _mm512_extracti64x4_epi64::<1>(hi),
    ];
    _mm256_sub_epi32(fold_pairs(t), _mm256_set1_epi32(128 * a_sum))
}
