//! `Shape`: a tensor's dimensions, stored inline (no heap allocation).

use std::fmt;

use crate::error::{Result, TensorError};

/// The highest rank a tensor may have.
pub const MAX_RANK: usize = 6;

/// Dimensions of a tensor, outermost first, stored inline up to [`MAX_RANK`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: u8,
}

impl Shape {
    /// The shape of a scalar (rank 0, one element).
    pub const SCALAR: Shape = Shape {
        dims: [0; MAX_RANK],
        rank: 0,
    };

    /// A shape from `dims`, or an error when the rank exceeds [`MAX_RANK`].
    pub fn new(dims: &[usize]) -> Result<Shape> {
        if dims.len() > MAX_RANK {
            return Err(TensorError::Rank {
                op: "shape",
                rank: dims.len(),
                what: "at most MAX_RANK (6) dims",
            });
        }
        let mut shape = Shape::SCALAR;
        shape.dims[..dims.len()].copy_from_slice(dims);
        shape.rank = dims.len() as u8;
        Ok(shape)
    }

    /// The dimensions.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    /// The dimensions, writable.
    #[inline]
    pub fn dims_mut(&mut self) -> &mut [usize] {
        &mut self.dims[..self.rank as usize]
    }

    /// The number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The size of dim `d` (panics never: out-of-range dims are an error).
    pub fn dim(&self, d: usize) -> Result<usize> {
        self.dims()
            .get(d)
            .copied()
            .ok_or(TensorError::DimOutOfRange {
                op: "dim",
                dim: d,
                rank: self.rank(),
            })
    }

    /// The number of elements (1 for a scalar), saturating at `usize::MAX` on overflow;
    /// use [`Self::checked_elem_count`] where overflow must be an error.
    #[inline]
    pub fn elem_count(&self) -> usize {
        self.dims()
            .iter()
            .fold(1usize, |acc, &d| acc.saturating_mul(d))
    }

    /// The number of elements, or `None` on overflow.
    pub fn checked_elem_count(&self) -> Option<usize> {
        self.dims()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// The last dim's size (1 for a scalar).
    pub fn last(&self) -> usize {
        self.dims().last().copied().unwrap_or(1)
    }

    /// Elements per row of the last dim, and the number of such rows.
    pub fn rows_cols(&self) -> (usize, usize) {
        let cols = self.last();
        let rows = self.elem_count().checked_div(cols).unwrap_or(0);
        (rows, cols)
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape::SCALAR
    }
}

impl TryFrom<&[usize]> for Shape {
    type Error = TensorError;
    fn try_from(dims: &[usize]) -> Result<Shape> {
        Shape::new(dims)
    }
}

impl<const N: usize> TryFrom<[usize; N]> for Shape {
    type Error = TensorError;
    fn try_from(dims: [usize; N]) -> Result<Shape> {
        Shape::new(&dims)
    }
}

impl TryFrom<&Vec<usize>> for Shape {
    type Error = TensorError;
    fn try_from(dims: &Vec<usize>) -> Result<Shape> {
        Shape::new(dims)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_basics() {
        let s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.rank(), 3);
        assert_eq!(s.elem_count(), 24);
        assert_eq!(s.rows_cols(), (6, 4));
        assert_eq!(s.to_string(), "[2, 3, 4]");
        assert_eq!(Shape::SCALAR.elem_count(), 1);
        assert!(Shape::new(&[1; 7]).is_err());
        assert_eq!(
            Shape::new(&[usize::MAX, 2]).unwrap().checked_elem_count(),
            None
        );
    }
}
