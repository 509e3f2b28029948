//! The AVX-512 micro-kernel: a 16×16 tile of C in 16 zmm accumulators.
//!
//! Per depth step it loads one 16-wide vector of the packed B panel and issues 16 FMAs,
//! each broadcasting one value of the packed A panel straight from memory (`{1to16}`
//! operands): 17 loads per 16 FMAs, which two 512-bit FMA pipes and three load ports
//! (Sapphire Rapids / Ice Lake server cores) sustain. Sixteen independent accumulators
//! cover the FMA latency (4 cycles × 2 pipes). The B panel is 16 wide like the AVX2
//! kernel's, so both share the B packing (and its F16/BF16/block conversions); the A
//! panel is 16 tall and packs with the same 16-wide register transpose.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of C per tile.
pub(crate) const MR: usize = 16;
/// Columns of C per tile.
pub(crate) const NR: usize = 16;
/// How far ahead (in f32s) the kernel prefetches its A panel: eight depth steps.
const A_AHEAD: usize = MR * 8;

/// `C[0..16, 0..16] (+)= A_panel · B_panel` over depth `kc`.
///
/// # Safety
///
/// The CPU supports AVX-512F; `a` points to `16 * kc` readable f32s (packed A panel),
/// `b` to `16 * kc` (packed B panel); `c` to a 16×16 tile with row stride `ldc`, readable
/// (when `accumulate`) and writable, not aliased by another thread while this runs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
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
    let mut acc = [_mm512_setzero_ps(); MR];
    let (mut a, mut b) = (a, b);
    /// One depth step: one B vector, sixteen broadcast FMAs.
    macro_rules! step {
        ($a:expr, $b:expr) => {{
            let bv = _mm512_loadu_ps($b);
            for (i, row) in acc.iter_mut().enumerate() {
                *row = _mm512_fmadd_ps(_mm512_set1_ps(*$a.add(i)), bv, *row);
            }
        }};
    }
    let mut p = 0;
    while p + 4 <= kc {
        // SAFETY: the caller guarantees `kc` steps of 16 (A and B) readable values;
        // prefetches are hints that never fault.
        unsafe {
            // The A panel streams from L2 (one line per step): ask for it eight steps
            // ahead.
            for line in 0..4 {
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(A_AHEAD + MR * line) as *const i8);
            }
            for u in 0..4 {
                step!(a.add(MR * u), b.add(NR * u));
            }
            a = a.add(MR * 4);
            b = b.add(NR * 4);
        }
        p += 4;
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
        // SAFETY: the caller guarantees a 16×16 tile at `c` with row stride `ldc`.
        unsafe {
            let ci = c.add(i * ldc);
            let mut r = *row;
            if accumulate {
                r = _mm512_add_ps(r, _mm512_loadu_ps(ci));
            }
            _mm512_storeu_ps(ci, r);
        }
    }
}
