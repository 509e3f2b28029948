//! Size classes: how requests are rounded so nearby sizes share cached blocks.
//!
//! - Requests up to [`SMALL_LIMIT`] round up to a power of two, at least [`MIN_CLASS`].
//! - Larger requests round up to a multiple of [`QUANTUM`] (4 KiB, a page), so a
//!   large request wastes less than one page to rounding.

/// The smallest class: one cache line. A zero-byte request gets a block of this size.
pub const MIN_CLASS: usize = 64;
/// The largest power-of-two class.
pub const SMALL_LIMIT: usize = 32 * 1024;
/// The rounding unit above `SMALL_LIMIT`.
pub const QUANTUM: usize = 4096;
/// From this class on, a request never receives a cached block more than
/// [`LARGE_WASTE_RATIO`] times its class.
pub const LARGE_CLASS: usize = 1024 * 1024;
/// The bound on waste for large requests.
pub const LARGE_WASTE_RATIO: usize = 2;
/// The bound on waste for small requests (small blocks are cheap to hold; reuse matters
/// more than their slack).
pub const SMALL_WASTE_RATIO: usize = 4;

/// The size class of a `bytes`-byte request, or `None` when it overflows.
#[inline]
pub fn size_class(bytes: usize) -> Option<usize> {
    if bytes <= MIN_CLASS {
        Some(MIN_CLASS)
    } else if bytes <= SMALL_LIMIT {
        Some(bytes.next_power_of_two())
    } else {
        bytes.checked_next_multiple_of(QUANTUM)
    }
}

/// The largest cached block a request of class `class` may receive.
#[inline]
pub fn max_block_for(class: usize) -> usize {
    let ratio = if class >= LARGE_CLASS {
        LARGE_WASTE_RATIO
    } else {
        SMALL_WASTE_RATIO
    };
    class.saturating_mul(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_classes_are_powers_of_two() {
        assert_eq!(size_class(0), Some(64));
        assert_eq!(size_class(1), Some(64));
        assert_eq!(size_class(65), Some(128));
        assert_eq!(size_class(1000), Some(1024));
        assert_eq!(size_class(SMALL_LIMIT), Some(SMALL_LIMIT));
    }

    #[test]
    fn large_classes_are_page_multiples() {
        assert_eq!(size_class(SMALL_LIMIT + 1), Some(SMALL_LIMIT + QUANTUM));
        assert_eq!(
            size_class(5 * 1024 * 1024 + 3),
            Some(5 * 1024 * 1024 + QUANTUM)
        );
        assert_eq!(size_class(usize::MAX), None);
    }

    proptest! {
        #[test]
        fn class_fits_and_is_idempotent(bytes in 0usize..(1usize << 40)) {
            let class = size_class(bytes).unwrap();
            prop_assert!(class >= bytes);
            prop_assert!(class >= MIN_CLASS);
            prop_assert_eq!(size_class(class), Some(class));
            if class <= SMALL_LIMIT {
                prop_assert!(class.is_power_of_two());
                prop_assert!(class < 2 * bytes.max(MIN_CLASS / 2 + 1) || class == MIN_CLASS);
            } else {
                prop_assert_eq!(class % QUANTUM, 0);
                prop_assert!(class - bytes < QUANTUM);
            }
        }

        #[test]
        fn classes_are_monotonic(a in 0usize..(1usize << 40), b in 0usize..(1usize << 40)) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(size_class(lo).unwrap() <= size_class(hi).unwrap());
        }

        #[test]
        fn waste_bound_holds_for_large(class_pages in (LARGE_CLASS / QUANTUM)..(1usize << 20)) {
            let class = class_pages * QUANTUM;
            prop_assert_eq!(max_block_for(class), 2 * class);
        }
    }
}
