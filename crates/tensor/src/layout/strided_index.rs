//! Walking a layout's storage without allocating: [`StridedIndex`] yields the storage
//! unit of every logical unit in row-major order, [`Runs`] yields maximal contiguous runs.
//!
//! Both first *coalesce* the layout: size-1 dims are dropped and each dim that is
//! contiguous with the one inside it (`stride[d] == size[d + 1] * stride[d + 1]`) is merged
//! into it. A contiguous layout becomes one dim; a transposed one stays as it is.

use std::iter::FusedIterator;

use super::Layout;
use crate::shape::MAX_RANK;

/// A layout's dims in storage units with size-1 dims dropped and contiguous neighbours
/// merged (outermost first).
#[derive(Clone, Copy, Debug)]
struct Coalesced {
    dims: [usize; MAX_RANK],
    strides: [usize; MAX_RANK],
    rank: usize,
    /// Product of `dims`: the number of logical units (0 when the layout is empty).
    count: usize,
}

impl Coalesced {
    fn new(layout: &Layout) -> Coalesced {
        let units = layout.unit_dims();
        let count = layout.unit_count();
        let mut c = Coalesced {
            dims: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            rank: 0,
            count,
        };
        if count == 0 {
            return c;
        }
        // Build innermost first, then reverse.
        for d in (0..layout.rank()).rev() {
            let (size, stride) = (units[d], layout.strides[d]);
            if size == 1 {
                continue;
            }
            if c.rank > 0 {
                let inner = c.rank - 1;
                if c.dims[inner].checked_mul(c.strides[inner]) == Some(stride) {
                    // Cannot overflow: the product of all dims is `count`.
                    c.dims[inner] *= size;
                    continue;
                }
            }
            c.dims[c.rank] = size;
            c.strides[c.rank] = stride;
            c.rank += 1;
        }
        c.dims[..c.rank].reverse();
        c.strides[..c.rank].reverse();
        c
    }
}

/// Iterator over the storage unit of every logical unit of a layout, in row-major order.
///
/// For plain dtypes a unit is an element; for block dtypes it is a block, i.e. the last
/// dim counts `dim / block_len` units. Broadcast dims repeat units. Allocation-free and
/// `Copy`-sized; made by [`Layout::strided_index`].
///
/// ```
/// use tempra_tensor::{DType, Layout, Shape};
///
/// let t = Layout::contiguous(Shape::new(&[2, 3])?, DType::F32)?.transpose(0, 1)?;
/// let offsets: Vec<usize> = t.strided_index().collect();
/// assert_eq!(offsets, [0, 3, 1, 4, 2, 5]);
/// # Ok::<(), tempra_tensor::TensorError>(())
/// ```
#[derive(Clone, Debug)]
pub struct StridedIndex {
    dims: [usize; MAX_RANK],
    strides: [usize; MAX_RANK],
    rank: usize,
    index: [usize; MAX_RANK],
    next: usize,
    remaining: usize,
}

impl StridedIndex {
    /// The iterator over `layout`'s storage units.
    pub fn new(layout: &Layout) -> StridedIndex {
        let c = Coalesced::new(layout);
        StridedIndex::over(c.dims, c.strides, c.rank, layout.offset, c.count)
    }

    /// The iterator over `rank` dims starting at unit `offset`, yielding `count` units
    /// (the product of the dims).
    fn over(
        dims: [usize; MAX_RANK],
        strides: [usize; MAX_RANK],
        rank: usize,
        offset: usize,
        count: usize,
    ) -> StridedIndex {
        StridedIndex {
            dims,
            strides,
            rank,
            index: [0; MAX_RANK],
            next: offset,
            remaining: count,
        }
    }
}

impl Iterator for StridedIndex {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        let out = self.next;
        self.remaining -= 1;
        if self.remaining > 0 {
            // Odometer step. On a valid layout every offset reached is a real unit of it
            // (at most `units_spanned - 1`), so nothing here overflows.
            for d in (0..self.rank).rev() {
                if self.index[d] + 1 < self.dims[d] {
                    self.index[d] += 1;
                    self.next += self.strides[d];
                    break;
                }
                self.next -= (self.dims[d] - 1) * self.strides[d];
                self.index[d] = 0;
            }
        }
        Some(out)
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for StridedIndex {}
impl FusedIterator for StridedIndex {}

/// Iterator over a layout's storage as contiguous runs `(start_unit, len_units)` in
/// row-major order; made by [`Layout::runs`].
///
/// After coalescing, the innermost dim is one run when its stride is 1 (every run then has
/// that length, [`Runs::run_len`]); otherwise every unit is a run of length 1. A
/// contiguous layout is a single run. Runs are maximal per dim: two runs from different
/// outer positions may happen to touch in storage without being merged.
///
/// ```
/// use tempra_tensor::{DType, Layout, Shape};
///
/// let l = Layout::contiguous(Shape::new(&[4, 6])?, DType::F32)?.narrow(1, 1, 4)?;
/// let runs: Vec<(usize, usize)> = l.runs().collect();
/// assert_eq!(runs, [(1, 4), (7, 4), (13, 4), (19, 4)]);
/// # Ok::<(), tempra_tensor::TensorError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Runs {
    starts: StridedIndex,
    run_len: usize,
}

impl Runs {
    /// The iterator over `layout`'s contiguous runs.
    pub fn new(layout: &Layout) -> Runs {
        let c = Coalesced::new(layout);
        let (outer, run_len) = match c.rank.checked_sub(1) {
            Some(inner) if c.strides[inner] == 1 => (inner, c.dims[inner]),
            _ => (c.rank, 1),
        };
        // An empty layout has count 0 (and rank 0), so no run is yielded.
        let count = if c.count == 0 { 0 } else { c.count / run_len };
        Runs {
            starts: StridedIndex::over(c.dims, c.strides, outer, layout.offset, count),
            run_len,
        }
    }

    /// The length in units of every run (1 when the innermost dim is not unit-strided).
    pub fn run_len(&self) -> usize {
        self.run_len
    }
}

impl Iterator for Runs {
    type Item = (usize, usize);

    #[inline]
    fn next(&mut self) -> Option<(usize, usize)> {
        self.starts.next().map(|start| (start, self.run_len))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.starts.size_hint()
    }
}

impl ExactSizeIterator for Runs {}
impl FusedIterator for Runs {}

impl Layout {
    /// The storage unit of every logical unit, row-major (see [`StridedIndex`]).
    pub fn strided_index(&self) -> StridedIndex {
        StridedIndex::new(self)
    }

    /// The storage as maximal contiguous runs `(start_unit, len_units)` (see [`Runs`]).
    pub fn runs(&self) -> Runs {
        Runs::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32l, sh};
    use super::*;
    use crate::dtype::DType;
    use crate::shape::Shape;

    fn idx(l: &Layout) -> Vec<usize> {
        l.strided_index().collect()
    }

    fn runs(l: &Layout) -> Vec<(usize, usize)> {
        l.runs().collect()
    }

    #[test]
    fn contiguous_is_one_run() {
        let l = f32l(&[2, 3, 4]);
        assert_eq!(idx(&l), (0..24).collect::<Vec<_>>());
        assert_eq!(runs(&l), [(0, 24)]);
        assert_eq!(l.runs().len(), 1);
        assert_eq!(l.strided_index().len(), 24);
    }

    #[test]
    fn transposed_and_narrowed() {
        let t = f32l(&[2, 3]).transpose(0, 1).unwrap();
        assert_eq!(idx(&t), [0, 3, 1, 4, 2, 5]);
        assert_eq!(runs(&t), [(0, 1), (3, 1), (1, 1), (4, 1), (2, 1), (5, 1)]);
        assert_eq!(t.runs().run_len(), 1);
        // [3, 3, 4] narrowed on dim 1: the two kept rows of 4 stay one run per outer index.
        let n = f32l(&[3, 3, 4]).narrow(1, 1, 2).unwrap();
        assert_eq!(runs(&n), [(4, 8), (16, 8), (28, 8)]);
    }

    #[test]
    fn broadcast_and_size_one() {
        let b = f32l(&[3]).broadcast_to(sh(&[2, 3])).unwrap();
        assert_eq!(idx(&b), [0, 1, 2, 0, 1, 2]);
        assert_eq!(runs(&b), [(0, 3), (0, 3)]);
        let c = f32l(&[2, 1]).broadcast_to(sh(&[2, 3])).unwrap();
        assert_eq!(idx(&c), [0, 0, 0, 1, 1, 1]);
        assert_eq!(runs(&c).len(), 6);
        let u = f32l(&[3, 1, 2]).narrow(2, 1, 1).unwrap();
        assert_eq!(idx(&u), [1, 3, 5]);
    }

    #[test]
    fn scalar_and_empty() {
        let s = Layout::from_parts(Shape::SCALAR, &[], 7, DType::F32).unwrap();
        assert_eq!(idx(&s), [7]);
        assert_eq!(runs(&s), [(7, 1)]);
        let e = f32l(&[2, 0]);
        assert!(idx(&e).is_empty());
        assert!(runs(&e).is_empty());
        assert_eq!(e.runs().len(), 0);
    }

    #[test]
    fn block_dtype_counts_blocks() {
        let q = Layout::contiguous(sh(&[3, 96]), DType::Q4_0).unwrap();
        assert_eq!(idx(&q), (0..9).collect::<Vec<_>>());
        let n = q.narrow(1, 32, 64).unwrap();
        assert_eq!(idx(&n), [1, 2, 4, 5, 7, 8]);
        assert_eq!(runs(&n), [(1, 2), (4, 2), (7, 2)]);
    }

    #[test]
    fn iterators_are_fused() {
        let mut it = f32l(&[1]).strided_index();
        assert_eq!(it.next(), Some(0));
        assert_eq!(it.next(), None);
        assert_eq!(it.next(), None);
    }
}
