//! The AVX2+FMA micro-kernel: a 6×16 tile of C in 12 ymm accumulators.
//!
//! Per depth step it loads two 8-wide vectors of the packed B panel, broadcasts six
//! values of the packed A panel and issues 12 FMAs: 15 of the 16 ymm registers live,
//! two FMA pipes busy on Zen 3 / Haswell-class cores.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of C per tile.
pub(crate) const MR: usize = 6;
/// Columns of C per tile.
pub(crate) const NR: usize = 16;
/// How far ahead (in f32s) the kernel prefetches its A panel.
const A_AHEAD: usize = MR * 16;

/// `C[0..6, 0..16] (+)= A_panel · B_panel` over depth `kc`.
///
/// # Safety
///
/// The CPU supports AVX2 and FMA; `a` points to `6 * kc` readable f32s (packed A panel),
/// `b` to `16 * kc` (packed B panel); `c` to a 6×16 tile with row stride `ldc`, readable
/// (when `accumulate`) and writable, not aliased by another thread while this runs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn kernel(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    for i in 0..MR {
        // Fetch the C tile while the products run (it is read or written at the end).
        // SAFETY: prefetches never fault; the addresses lie inside the tile anyway.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(c.add(i * ldc + NR - 1) as *const i8);
        }
    }
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    let (mut a, mut b) = (a, b);
    /// One depth step: two B vectors, six A broadcasts, twelve FMAs.
    macro_rules! step {
        ($a:expr, $b:expr) => {{
            let b0 = _mm256_loadu_ps($b);
            let b1 = _mm256_loadu_ps($b.add(8));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_broadcast_ss(&*$a.add(i));
                row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
            }
        }};
    }
    let mut p = 0;
    while p + 8 <= kc {
        // SAFETY: the caller guarantees `kc` steps of 16 (B) and 6 (A) readable values;
        // prefetches are hints that never fault.
        unsafe {
            // The A panel streams from L2: ask for it 16 steps (384 bytes) ahead.
            for line in 0..3 {
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(A_AHEAD + 16 * line) as *const i8);
            }
            for u in 0..8 {
                step!(a.add(MR * u), b.add(NR * u));
            }
            a = a.add(MR * 8);
            b = b.add(NR * 8);
        }
        p += 8;
    }
    while p < kc {
        // SAFETY: as above.
        unsafe {
            step!(a, b);
            a = a.add(MR);
            b = b.add(NR);
        }
        p += 1;
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: the caller guarantees a 6×16 tile at `c` with row stride `ldc`.
        unsafe {
            let ci = c.add(i * ldc);
            let (mut r0, mut r1) = (row[0], row[1]);
            if accumulate {
                r0 = _mm256_add_ps(r0, _mm256_loadu_ps(ci));
                r1 = _mm256_add_ps(r1, _mm256_loadu_ps(ci.add(8)));
            }
            _mm256_storeu_ps(ci, r0);
            _mm256_storeu_ps(ci.add(8), r1);
        }
    }
}
