//! AVX2 packing helpers: 8×8 register transposes that turn sixteen depth runs into a
//! 16-wide B panel (from f32 or, converted on the way, f16 runs) and six runs into a
//! 6-tall A panel, and an F16C conversion of half runs.
//!
//! A weight `w [N, K]` multiplied as `B = wᵀ`, and a row-major activation `A [M, K]`, are
//! contiguous along the depth, while a panel wants the columns (rows) of each depth step
//! side by side: the portable pack scatters every value to its own slot (one store each,
//! a pass over the panel per run); here eight values of eight runs become eight full
//! vectors with 24 shuffles.
//!
//! Each helper also asks the cache for the next panel's runs (`next` of them, starting
//! right after this panel's), one line per run per line of depth it packs: spread over
//! the panel instead of a burst of a hundred prefetches ahead of it, which stalled on the
//! full miss queue (F16 prefill profiles showed samples sitting on the burst).

use std::arch::x86_64::*;

use half::f16;

/// The transpose of eight rows of eight: `out[j][i] = rows[i][j]`.
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    // Per 128-bit lane: columns 0/4 (s0), 1/5 (s1), 2/6 (s2), 3/7 (s3) of rows 0–3.
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

/// Asks for line `p` (in elements of `T`) of each of the `next` runs that follow the `w`
/// runs at `src` (`stride` elements apart): the next panel's, packed after this one.
#[inline(always)]
fn prefetch_next<T>(src: *const T, stride: usize, w: usize, next: usize, p: usize) {
    for i in 0..next {
        // SAFETY: a prefetch is a hint and never faults; `wrapping_add` keeps the address
        // computation defined even past the operand (the caller passes only runs that
        // exist, so it is not).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add((w + i) * stride + p) as *const i8) };
    }
}

/// A value type the register transposes read: eight of them load as one f32 vector.
trait Source: Copy {
    /// Values per 64-byte cache line.
    const PER_LINE: usize;

    /// Eight values from `src`, as f32s.
    ///
    /// # Safety
    ///
    /// AVX2 and F16C present; eight values readable at `src`.
    unsafe fn load8(src: *const Self) -> __m256;

    /// One value as f32.
    fn to_f32(self) -> f32;
}

impl Source for f32 {
    const PER_LINE: usize = 16;

    #[inline(always)]
    unsafe fn load8(src: *const f32) -> __m256 {
        // SAFETY: eight f32s readable (the caller's contract), AVX present.
        unsafe { _mm256_loadu_ps(src) }
    }

    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

impl Source for f16 {
    const PER_LINE: usize = 32;

    #[inline(always)]
    unsafe fn load8(src: *const f16) -> __m256 {
        // SAFETY: eight halves (128 bits) readable (the caller's contract), F16C present.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(src.cast())) }
    }

    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

/// Packs sixteen runs of `kc` values (run `i` starts at `src + i * stride`) into a
/// `kc × 16` f32 panel at `out` (`out[p * 16 + i] = run_i[p]`), prefetching the
/// `next ≤ 16` runs after them.
///
/// # Safety
///
/// AVX2 and F16C present; `src + i * stride + p` readable for `i < 16`, `p < kc`;
/// `16 · kc` writable f32s at `out`, not overlapping the runs.
#[inline(always)]
unsafe fn transpose16_from<T: Source>(
    src: *const T,
    stride: usize,
    kc: usize,
    out: *mut f32,
    next: usize,
) {
    let mut p = 0;
    while p + 8 <= kc {
        if p % T::PER_LINE == 0 {
            prefetch_next(src, stride, 16, next, p);
        }
        for half in 0..2 {
            // SAFETY: rows `half·8 .. half·8 + 8`, depths `p .. p + 8 ≤ kc`: readable per
            // the contract; the stores land in depth rows `p .. p + 8` of the panel.
            unsafe {
                let rows: [__m256; 8] =
                    std::array::from_fn(|i| T::load8(src.add((half * 8 + i) * stride + p)));
                for (d, v) in transpose8(rows).into_iter().enumerate() {
                    _mm256_storeu_ps(out.add((p + d) * 16 + half * 8), v);
                }
            }
        }
        p += 8;
    }
    for p in p..kc {
        for i in 0..16 {
            // SAFETY: as above, one value at a time for the last `kc % 8` depths.
            unsafe { *out.add(p * 16 + i) = (*src.add(i * stride + p)).to_f32() };
        }
    }
}

/// [`transpose16_from`] for f32 runs (a `B = wᵀ` of f32 weights).
///
/// # Safety
///
/// As [`transpose16_from`].
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn transpose16(
    src: *const f32,
    stride: usize,
    kc: usize,
    out: *mut f32,
    next: usize,
) {
    // SAFETY: forwarded contract; this function enables the features it needs.
    unsafe { transpose16_from(src, stride, kc, out, next) }
}

/// [`transpose16_from`] for runs of halves, converted to f32 on the way (no intermediate
/// f32 runs: the conversion feeds the transpose in registers).
///
/// # Safety
///
/// As [`transpose16_from`].
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn transpose16_f16(
    src: *const f16,
    stride: usize,
    kc: usize,
    out: *mut f32,
    next: usize,
) {
    // SAFETY: forwarded contract; this function enables the features it needs.
    unsafe { transpose16_from(src, stride, kc, out, next) }
}

/// Packs six runs of `kc` f32s (run `i` starts at `src + i * stride`) into a `kc × 6`
/// panel at `out` (`out[p * 6 + i] = run_i[p]`, the AVX2 kernel's A panel), prefetching
/// the `next ≤ 6` runs after them.
///
/// Eight depths at a time: the six runs and two zero rows go through the 8×8 transpose,
/// and each depth's vector is stored whole in increasing order, its two surplus lanes
/// overwritten by the next depth's store; the last depth of the eight stores six lanes.
///
/// # Safety
///
/// AVX2 present; `src + i * stride + p` readable for `i < 6`, `p < kc`; `6 · kc`
/// writable f32s at `out`, not overlapping the runs.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose6(
    src: *const f32,
    stride: usize,
    kc: usize,
    out: *mut f32,
    next: usize,
) {
    let mut p = 0;
    while p + 8 <= kc {
        if p % 16 == 0 {
            prefetch_next(src, stride, 6, next, p);
        }
        // SAFETY: runs `0..6`, depths `p .. p + 8 ≤ kc`: readable per the contract. Depth
        // `p + d < kc` writes `out[(p + d)·6 ..][..8]` for `d < 7`, which ends at
        // `(p + 7)·6 + 2 ≤ 6·kc`, and six values for `d = 7`: all inside the panel.
        unsafe {
            let rows: [__m256; 8] = std::array::from_fn(|i| {
                if i < 6 {
                    _mm256_loadu_ps(src.add(i * stride + p))
                } else {
                    _mm256_setzero_ps()
                }
            });
            let cols = transpose8(rows);
            for (d, v) in cols.iter().enumerate().take(7) {
                _mm256_storeu_ps(out.add((p + d) * 6), *v);
            }
            let last = out.add((p + 7) * 6);
            _mm_storeu_ps(last, _mm256_castps256_ps128(cols[7]));
            _mm_store_sd(
                last.add(4).cast(),
                _mm_castps_pd(_mm256_extractf128_ps::<1>(cols[7])),
            );
        }
        p += 8;
    }
    for p in p..kc {
        for i in 0..6 {
            // SAFETY: as above, one value at a time for the last `kc % 8` depths.
            unsafe { *out.add(p * 6 + i) = *src.add(i * stride + p) };
        }
    }
}

/// Packs `panels` full 16-wide panels of depth `kc` from halves contiguous along the
/// panel width (column `j`, depth `p` at `src + p · k_stride + j`), converting on the
/// way: `out[q · 16 · kc + p · 16 + i] = src[p · k_stride + q · 16 + i]` — a value block
/// of attention, or any B whose rows are the depth.
///
/// # Safety
///
/// AVX2 and F16C present; `src + p · k_stride + j` readable for `p < kc`, `j < 16 ·
/// panels`; `16 · kc · panels` writable f32s at `out`.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn rows16_f16(
    src: *const f16,
    k_stride: usize,
    panels: usize,
    kc: usize,
    out: *mut f32,
) {
    for p in 0..kc {
        for q in 0..panels {
            // SAFETY: depth `p < kc`, columns `16q .. 16q + 16 ≤ 16 · panels`: readable;
            // the 16 f32s land in panel `q`'s depth row `p`, inside the `16 · kc · panels`
            // written ones.
            unsafe {
                let s = src.add(p * k_stride + q * 16);
                let lo = _mm256_cvtph_ps(_mm_loadu_si128(s.cast()));
                let hi = _mm256_cvtph_ps(_mm_loadu_si128(s.add(8).cast()));
                let o = out.add(q * 16 * kc + p * 16);
                _mm256_storeu_ps(o, lo);
                _mm256_storeu_ps(o.add(8), hi);
            }
        }
    }
}

/// Converts `src` to f32 into `dst` (equal lengths).
///
/// # Safety
///
/// AVX2 and F16C present.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "f16 run and destination differ in length"
    );
    let mut i = 0;
    while i + 8 <= src.len() {
        // SAFETY: 8 halves read and 8 f32s written at `i + 8 ≤ len`.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
        i += 8;
    }
    for (d, s) in dst[i..].iter_mut().zip(&src[i..]) {
        *d = s.to_f32();
    }
}
