//! Walking several layouts of one shape together, one inner run at a time.
//!
//! [`Walk`] coalesces the operands jointly (drops size-1 dims, merges a dim into the one
//! inside it when that is contiguous for *every* operand), leaving an inner dim and the
//! outer dims. A kernel then sees runs: `len` elements starting at one storage offset per
//! operand, each operand stepping by its inner stride (1: contiguous, 0: broadcast, other:
//! strided). Any flat range of the logical elements can be walked, which is how
//! elementwise ops split work between threads.

use std::ops::Range;

use tempra_tensor::{Layout, MAX_RANK};

/// The joint walk of `K` layouts of one shape, in storage units.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk<const K: usize> {
    /// Outer dims, outermost first (`rank` of them).
    dims: [usize; MAX_RANK],
    /// Per operand, the strides of the outer dims.
    strides: [[usize; MAX_RANK]; K],
    rank: usize,
    /// The inner run length (1 for a scalar).
    inner: usize,
    /// Per operand, the inner stride.
    inner_strides: [usize; K],
    /// Per operand, the storage offset of the first element.
    offsets: [usize; K],
    /// Total elements.
    count: usize,
}

impl<const K: usize> Walk<K> {
    /// The walk of `layouts`, which must all have the same unit shape (plain dtypes: the
    /// same shape).
    pub(crate) fn new(layouts: [&Layout; K]) -> Walk<K> {
        let shape = layouts[0].unit_shape();
        let dims = shape.dims();
        let mut walk = Walk {
            dims: [0; MAX_RANK],
            strides: [[0; MAX_RANK]; K],
            rank: 0,
            inner: 1,
            inner_strides: [0; K],
            offsets: layouts.map(|l| l.offset()),
            count: dims.iter().product(),
        };
        // Build innermost first into (dims, strides) lists, then split off the inner dim.
        let mut n = 0;
        let mut cd = [0usize; MAX_RANK];
        let mut cs = [[0usize; MAX_RANK]; K];
        for d in (0..dims.len()).rev() {
            let size = dims[d];
            if size == 1 {
                continue;
            }
            if n > 0 {
                let inner = n - 1;
                let mergeable = (0..K)
                    .all(|k| cd[inner].checked_mul(cs[k][inner]) == Some(layouts[k].strides()[d]));
                if mergeable {
                    cd[inner] *= size;
                    continue;
                }
            }
            cd[n] = size;
            for k in 0..K {
                cs[k][n] = layouts[k].strides()[d];
            }
            n += 1;
        }
        if n == 0 {
            return walk;
        }
        walk.inner = cd[0];
        for k in 0..K {
            walk.inner_strides[k] = cs[k][0];
        }
        walk.rank = n - 1;
        for i in 0..walk.rank {
            // Outermost first.
            walk.dims[i] = cd[n - 1 - i];
            for k in 0..K {
                walk.strides[k][i] = cs[k][n - 1 - i];
            }
        }
        walk
    }

    /// Total elements walked.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The inner run length.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> usize {
        self.inner
    }

    /// Per operand, the inner stride.
    pub(crate) fn inner_strides(&self) -> [usize; K] {
        self.inner_strides
    }

    /// Calls `f(offsets, len)` for the runs covering the flat element `range` (row-major
    /// logical order): `len` elements whose first is at storage unit `offsets[k]` of
    /// operand `k`, which then steps by its inner stride.
    #[inline]
    pub(crate) fn for_each_run(&self, range: Range<usize>, mut f: impl FnMut([usize; K], usize)) {
        if range.is_empty() || self.count == 0 {
            return;
        }
        let (rank, inner) = (self.rank, self.inner);
        let mut pos_inner = range.start % inner;
        let mut outer = range.start / inner;
        // The outer multi-index of `range.start` and the matching offsets.
        let mut index = [0usize; MAX_RANK];
        let mut offs = self.offsets;
        for d in (0..rank).rev() {
            index[d] = outer % self.dims[d];
            outer /= self.dims[d];
            for k in 0..K {
                offs[k] += index[d] * self.strides[k][d];
            }
        }
        let mut remaining = range.len();
        loop {
            let len = (inner - pos_inner).min(remaining);
            let mut run = offs;
            for k in 0..K {
                run[k] += pos_inner * self.inner_strides[k];
            }
            f(run, len);
            remaining -= len;
            if remaining == 0 {
                return;
            }
            pos_inner = 0;
            // Odometer step over the outer dims.
            for d in (0..rank).rev() {
                if index[d] + 1 < self.dims[d] {
                    index[d] += 1;
                    for k in 0..K {
                        offs[k] += self.strides[k][d];
                    }
                    break;
                }
                for k in 0..K {
                    offs[k] -= (self.dims[d] - 1) * self.strides[k][d];
                }
                index[d] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tempra_tensor::{DType, Shape};

    use super::*;

    fn layout(dims: &[usize]) -> Layout {
        Layout::contiguous(Shape::new(dims).unwrap(), DType::F32).unwrap()
    }

    /// Every (offsets) element by element, from the runs of `range`.
    fn elements<const K: usize>(walk: &Walk<K>, range: Range<usize>) -> Vec<[usize; K]> {
        let mut out = Vec::new();
        walk.for_each_run(range, |offs, len| {
            for i in 0..len {
                let mut e = offs;
                for k in 0..K {
                    e[k] += i * walk.inner_strides()[k];
                }
                out.push(e);
            }
        });
        out
    }

    #[test]
    fn matches_strided_index_for_any_range() {
        let base = layout(&[3, 4, 5]);
        let t = base.permute(&[2, 0, 1]).unwrap();
        let b = layout(&[1, 4, 1])
            .broadcast_to(Shape::new(&[5, 4, 3]).unwrap())
            .unwrap();
        let b = b.permute(&[0, 2, 1]).unwrap(); // [5, 3, 4]
        let walk = Walk::new([&t, &b, &layout(&[5, 3, 4])]);
        let want: Vec<[usize; 3]> = t
            .strided_index()
            .zip(b.strided_index())
            .zip(0..60)
            .map(|((a, b), c)| [a, b, c])
            .collect();
        assert_eq!(elements(&walk, 0..60), want);
        for (s, e) in [(0, 1), (3, 17), (13, 60), (59, 60), (20, 20)] {
            assert_eq!(elements(&walk, s..e), want[s..e].to_vec(), "{s}..{e}");
        }
    }

    #[test]
    fn contiguous_operands_merge_into_one_run() {
        let a = layout(&[4, 6, 8]);
        let walk = Walk::new([&a, &a]);
        assert_eq!(walk.inner(), 192);
        let row = layout(&[8])
            .broadcast_to(Shape::new(&[4, 6, 8]).unwrap())
            .unwrap();
        let walk = Walk::new([&a, &row]);
        assert_eq!(walk.inner(), 8);
        assert_eq!(walk.inner_strides(), [1, 1]);
        let col = layout(&[4, 6, 1])
            .broadcast_to(Shape::new(&[4, 6, 8]).unwrap())
            .unwrap();
        let walk = Walk::new([&a, &col]);
        assert_eq!(walk.inner_strides(), [1, 0]);
        let scalar = Layout::contiguous(Shape::SCALAR, DType::F32).unwrap();
        let walk = Walk::new([&scalar]);
        assert_eq!((walk.count(), walk.inner()), (1, 1));
        assert_eq!(elements(&walk, 0..1), vec![[0]]);
    }
}
