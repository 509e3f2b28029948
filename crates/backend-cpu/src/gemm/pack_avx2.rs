//! AVX2 packing helpers: an 8×8 register transpose that turns sixteen depth runs into a
//! 16-wide B panel, and an F16C conversion of half runs.
//!
//! A weight `w [N, K]` multiplied as `B = wᵀ` is contiguous along the depth, while a B
//! panel wants the sixteen columns of each depth step side by side: the portable pack
//! scatters every value to its own cache line (one store each, 16 passes over the panel);
//! here eight values of eight runs become eight full vectors with 24 shuffles.

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

/// Packs sixteen runs of `kc` f32s (run `i` starts at `src + i * stride`) into a
/// `kc × 16` panel at `out` (`out[p * 16 + i] = run_i[p]`).
///
/// # Safety
///
/// AVX2 present; `src + i * stride + p` readable for `i < 16`, `p < kc`; `16 · kc`
/// writable f32s at `out`, not overlapping the runs.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose16(src: *const f32, stride: usize, kc: usize, out: *mut f32) {
    let mut p = 0;
    while p + 8 <= kc {
        for half in 0..2 {
            // SAFETY: rows `half·8 .. half·8 + 8`, depths `p .. p + 8 ≤ kc`: readable per
            // the contract; the stores land in depth rows `p .. p + 8` of the panel.
            unsafe {
                let rows: [__m256; 8] =
                    std::array::from_fn(|i| _mm256_loadu_ps(src.add((half * 8 + i) * stride + p)));
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
            unsafe { *out.add(p * 16 + i) = *src.add(i * stride + p) };
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
