//! A portable software prefetch hint.

/// Asks the cache for the line holding `v[at]` (a hint: nothing when out of range).
///
/// For reads the hardware prefetcher does not follow: short runs far apart, as the GEMM
/// packs read an operand (without it, packing ran at DRAM latency per value) and as
/// attention reads a head's cached keys and values (a row of 128 bytes every few KiB).
#[inline(always)]
pub(crate) fn prefetch<T>(v: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = v.get(at) {
        // SAFETY: a prefetch is only a hint and never faults; the address is in bounds.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (x as *const T).cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, at);
}
