//! The portable micro-kernel: a 4×8 tile in plain Rust (the compiler vectorizes it with
//! the baseline SIMD of the target).

/// Rows of C per tile.
pub(crate) const MR: usize = 4;
/// Columns of C per tile.
pub(crate) const NR: usize = 8;

/// `C[0..4, 0..8] (+)= A_panel · B_panel` over depth `kc`.
///
/// # Safety
///
/// `a` points to `4 * kc` readable f32s, `b` to `8 * kc`; `c` to a 4×8 tile with row
/// stride `ldc`, readable (when `accumulate`) and writable, not aliased by another thread.
pub(crate) unsafe fn kernel(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    // SAFETY: the caller guarantees the panel lengths.
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a, MR * kc),
            std::slice::from_raw_parts(b, NR * kc),
        )
    };
    let mut acc = [[0f32; NR]; MR];
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for (row, &ai) in acc.iter_mut().zip(ap) {
            for (x, &bj) in row.iter_mut().zip(bp) {
                *x += ai * bj;
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        // SAFETY: the caller guarantees a 4×8 writable tile with row stride `ldc`.
        let ci = unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), NR) };
        for (o, &x) in ci.iter_mut().zip(row) {
            *o = if accumulate { *o + x } else { x };
        }
    }
}
