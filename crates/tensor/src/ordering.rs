//! The order `top_k` ranks values in, the same on every backend: descending, NaN above
//! every number (as torch's `topk` and tempra's `argmax` treat it), and between equal
//! values (`-0.0 == 0.0`, and any two NaNs) the lower index first. It is a strict total
//! order on `(value, index)` pairs, so the `k` chosen and their order never depend on how
//! a kernel walks the row.

/// Whether `a` at index `ia` ranks above `b` at index `ib` (comes first in `top_k`).
#[inline]
pub fn ranks_above(a: f64, ia: usize, b: f64, ib: usize) -> bool {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => ia < ib,
        (true, false) => true,
        (false, true) => false,
        (false, false) => a > b || (a == b && ia < ib),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descending_nan_first_ties_by_index() {
        assert!(ranks_above(2.0, 5, 1.0, 0));
        assert!(!ranks_above(1.0, 0, 2.0, 5));
        assert!(ranks_above(1.0, 0, 1.0, 3));
        assert!(!ranks_above(1.0, 3, 1.0, 0));
        assert!(ranks_above(-0.0, 1, 0.0, 2) && ranks_above(0.0, 1, -0.0, 2));
        assert!(ranks_above(f64::NAN, 9, f64::INFINITY, 0));
        assert!(!ranks_above(f64::INFINITY, 0, f64::NAN, 9));
        assert!(ranks_above(f64::NAN, 1, f64::NAN, 2));
        assert!(ranks_above(f64::NEG_INFINITY, 0, f64::NEG_INFINITY, 1));
        assert!(!ranks_above(3.0, 4, 3.0, 4), "irreflexive");
    }
}
