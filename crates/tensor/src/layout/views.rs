//! Views that pick, reorder or add/drop dims: narrow, transpose, permute, squeeze,
//! unsqueeze, select. Each returns a new [`Layout`] over the same storage.

use super::{Layout, shape_from};
use crate::error::{Result, TensorError};
use crate::shape::MAX_RANK;

/// Why a narrow of the last dim of a block dtype is rejected.
const SPLITS_BLOCK: &str = "would split a quantization block: start and len on the last dim \
                            must be multiples of the block length";
/// Why moving the last dim of a block dtype is rejected.
const MOVES_BLOCK_DIM: &str =
    "cannot move the last dim of a block-quantized dtype away (blocks run along it)";
/// Why dropping the last dim of a block dtype is rejected.
const DROPS_BLOCK_DIM: &str =
    "cannot drop the last dim of a block-quantized dtype (blocks run along it)";
/// Why adding a new last dim to a block dtype is rejected.
const NEW_LAST_DIM: &str =
    "cannot add a size-1 last dim to a block-quantized dtype (blocks run along the last dim)";
/// Why a squeeze of a dim whose size is not 1 is rejected.
const NOT_SIZE_ONE: &str = "can only squeeze a dim of size 1";
/// Why a permutation with a repeated dim is rejected.
const NOT_A_PERMUTATION: &str = "permute dims must name every dim exactly once";

impl Layout {
    /// The view of `len` indices of `dim` starting at `start` (elements, for every dtype).
    ///
    /// Errors: [`TensorError::DimOutOfRange`] for a bad `dim`; [`TensorError::OutOfBounds`]
    /// when `start + len` passes the dim's size; for a block dtype on its last dim, a
    /// `start` or `len` that is not a multiple of the block length is a
    /// [`TensorError::View`] (it would split a block).
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Layout> {
        const OP: &str = "narrow";
        let size = self.check_dim(OP, dim)?;
        match start.checked_add(len) {
            Some(end) if end <= size => {}
            _ => {
                return Err(TensorError::OutOfBounds {
                    op: OP,
                    dim,
                    start,
                    end: start.saturating_add(len),
                    size,
                });
            }
        }
        let mut unit_start = start;
        if self.is_block_dim(dim) {
            let bl = self.dtype.block_len();
            if !start.is_multiple_of(bl) || !len.is_multiple_of(bl) {
                return Err(self.view_err(OP, SPLITS_BLOCK));
            }
            unit_start = start / bl;
        }
        let mut out = *self;
        out.offset = self.shifted_offset(unit_start, dim);
        out.shape.dims_mut()[dim] = len;
        Ok(out)
    }

    /// The view with dims `d0` and `d1` swapped.
    ///
    /// Errors: [`TensorError::DimOutOfRange`] for a bad dim; for a block dtype, moving the
    /// last dim elsewhere is a [`TensorError::View`].
    pub fn transpose(&self, d0: usize, d1: usize) -> Result<Layout> {
        const OP: &str = "transpose";
        self.check_dim(OP, d0)?;
        self.check_dim(OP, d1)?;
        if d0 != d1 && (self.is_block_dim(d0) || self.is_block_dim(d1)) {
            return Err(self.view_err(OP, MOVES_BLOCK_DIM));
        }
        let mut out = *self;
        out.shape.dims_mut().swap(d0, d1);
        out.strides.swap(d0, d1);
        Ok(out)
    }

    /// The view whose dim `i` is this layout's dim `perm[i]`.
    ///
    /// Errors: a `perm` whose length is not the rank is a [`TensorError::Rank`]; an entry
    /// past the rank is a [`TensorError::DimOutOfRange`]; a repeated entry is a
    /// [`TensorError::View`]; for a block dtype, moving the last dim is a
    /// [`TensorError::View`].
    pub fn permute(&self, perm: &[usize]) -> Result<Layout> {
        const OP: &str = "permute";
        let rank = self.rank();
        if perm.len() != rank {
            return Err(TensorError::Rank {
                op: OP,
                rank: perm.len(),
                what: "a permutation of every dim of the layout",
            });
        }
        let mut seen = [false; MAX_RANK];
        let mut dims = [0; MAX_RANK];
        let mut strides = [0; MAX_RANK];
        for (i, &p) in perm.iter().enumerate() {
            dims[i] = self.check_dim(OP, p)?;
            if seen[p] {
                return Err(self.view_err(OP, NOT_A_PERMUTATION));
            }
            seen[p] = true;
            strides[i] = self.strides[p];
        }
        if self.dtype.is_quantized() && perm[rank - 1] != rank - 1 {
            return Err(self.view_err(OP, MOVES_BLOCK_DIM));
        }
        Ok(Layout {
            shape: shape_from(&dims, rank),
            strides,
            ..*self
        })
    }

    /// The view without `dim`, which must have size 1.
    ///
    /// Errors: [`TensorError::DimOutOfRange`] for a bad `dim`; a dim whose size is not 1,
    /// or the last dim of a block dtype, is a [`TensorError::View`].
    pub fn squeeze(&self, dim: usize) -> Result<Layout> {
        const OP: &str = "squeeze";
        let size = self.check_dim(OP, dim)?;
        if self.is_block_dim(dim) {
            return Err(self.view_err(OP, DROPS_BLOCK_DIM));
        }
        if size != 1 {
            return Err(self.view_err(OP, NOT_SIZE_ONE));
        }
        Ok(self.without_dim(dim))
    }

    /// The view with a new size-1 dim inserted at position `dim` (`0..=rank`).
    ///
    /// Errors: `dim > rank` is a [`TensorError::DimOutOfRange`] (reported against the
    /// output's rank, `rank + 1`); a layout already at [`MAX_RANK`] is a
    /// [`TensorError::Rank`]; a new last dim on a block dtype is a [`TensorError::View`].
    pub fn unsqueeze(&self, dim: usize) -> Result<Layout> {
        const OP: &str = "unsqueeze";
        let rank = self.rank();
        if dim > rank {
            return Err(TensorError::DimOutOfRange {
                op: OP,
                dim,
                rank: rank + 1,
            });
        }
        if rank == MAX_RANK {
            return Err(TensorError::Rank {
                op: OP,
                rank: rank + 1,
                what: "at most MAX_RANK (6) dims",
            });
        }
        if self.dtype.is_quantized() && dim == rank {
            return Err(self.view_err(OP, NEW_LAST_DIM));
        }
        // A size-1 dim's stride never moves the address; pick the row-major one.
        let stride = if dim < rank {
            self.strides[dim].saturating_mul(self.unit_dims()[dim])
        } else {
            1
        };
        let mut dims = [0; MAX_RANK];
        let mut strides = [0; MAX_RANK];
        dims[..dim].copy_from_slice(&self.dims()[..dim]);
        strides[..dim].copy_from_slice(&self.strides[..dim]);
        dims[dim] = 1;
        strides[dim] = stride;
        dims[dim + 1..=rank].copy_from_slice(&self.dims()[dim..]);
        strides[dim + 1..=rank].copy_from_slice(&self.strides[dim..rank]);
        Ok(Layout {
            shape: shape_from(&dims, rank + 1),
            strides,
            ..*self
        })
    }

    /// The view of index `index` of `dim`, with `dim` dropped (`narrow(dim, index, 1)`
    /// then `squeeze(dim)`).
    ///
    /// Errors: [`TensorError::DimOutOfRange`] for a bad `dim`; [`TensorError::OutOfBounds`]
    /// for an index past the dim; the last dim of a block dtype is a [`TensorError::View`].
    pub fn select(&self, dim: usize, index: usize) -> Result<Layout> {
        const OP: &str = "select";
        let size = self.check_dim(OP, dim)?;
        if self.is_block_dim(dim) {
            return Err(self.view_err(OP, DROPS_BLOCK_DIM));
        }
        if index >= size {
            return Err(TensorError::OutOfBounds {
                op: OP,
                dim,
                start: index,
                end: index.saturating_add(1),
                size,
            });
        }
        let mut out = self.without_dim(dim);
        out.offset = self.shifted_offset(index, dim);
        Ok(out)
    }

    /// `offset + units * stride[dim]`. For a non-empty result this is an addressed unit,
    /// inside the span invariant; only an empty result (whose offset addresses nothing)
    /// can exceed `usize`, and it saturates there.
    fn shifted_offset(&self, units: usize, dim: usize) -> usize {
        self.offset
            .saturating_add(units.saturating_mul(self.strides[dim]))
    }

    /// This layout with `dim` (< rank) removed.
    fn without_dim(&self, dim: usize) -> Layout {
        let rank = self.rank();
        let mut dims = [0; MAX_RANK];
        let mut strides = [0; MAX_RANK];
        dims[..dim].copy_from_slice(&self.dims()[..dim]);
        strides[..dim].copy_from_slice(&self.strides[..dim]);
        dims[dim..rank - 1].copy_from_slice(&self.dims()[dim + 1..]);
        strides[dim..rank - 1].copy_from_slice(&self.strides[dim + 1..rank]);
        Layout {
            shape: shape_from(&dims, rank - 1),
            strides,
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32l, sh};
    use super::*;
    use crate::dtype::DType;

    fn q40(dims: &[usize]) -> Layout {
        Layout::contiguous(sh(dims), DType::Q4_0).unwrap()
    }

    #[test]
    fn narrow_moves_offset_and_shrinks() {
        let l = f32l(&[4, 5]).narrow(1, 2, 3).unwrap();
        assert_eq!(l.dims(), &[4, 3]);
        assert_eq!(l.strides(), &[5, 1]);
        assert_eq!(l.offset(), 2);
        assert!(!l.is_contiguous());
        assert_eq!(l.units_spanned(), 20);
        let r = f32l(&[4, 5]).narrow(0, 1, 2).unwrap();
        assert_eq!(r.offset(), 5);
        assert_eq!(r.contiguous_range(), Some(5..15));
        // Empty narrow at the end is fine.
        let e = f32l(&[4, 5]).narrow(0, 4, 0).unwrap();
        assert_eq!(e.elem_count(), 0);
        assert_eq!(e.units_spanned(), 0);
    }

    #[test]
    fn narrow_errors() {
        let l = f32l(&[4, 5]);
        assert_eq!(
            l.narrow(2, 0, 1).unwrap_err(),
            TensorError::DimOutOfRange {
                op: "narrow",
                dim: 2,
                rank: 2
            }
        );
        assert_eq!(
            l.narrow(1, 3, 3).unwrap_err(),
            TensorError::OutOfBounds {
                op: "narrow",
                dim: 1,
                start: 3,
                end: 6,
                size: 5
            }
        );
        assert_eq!(
            l.narrow(1, usize::MAX, 2).unwrap_err(),
            TensorError::OutOfBounds {
                op: "narrow",
                dim: 1,
                start: usize::MAX,
                end: usize::MAX,
                size: 5
            }
        );
    }

    #[test]
    fn narrow_block_dtype() {
        let l = q40(&[2, 128]);
        let n = l.narrow(1, 32, 64).unwrap();
        assert_eq!(n.dims(), &[2, 64]);
        assert_eq!(n.offset(), 1);
        assert_eq!(n.strides(), &[4, 1]);
        assert_eq!(n.index_to_offset(&[1, 63]).unwrap(), 4 + 1 + 1);
        // Other dims narrow freely.
        assert_eq!(l.narrow(0, 1, 1).unwrap().offset(), 4);
        for (start, len) in [(16, 32), (0, 48), (32, 1)] {
            let e = l.narrow(1, start, len).unwrap_err();
            assert!(
                matches!(
                    e,
                    TensorError::View {
                        op: "narrow",
                        reason: SPLITS_BLOCK,
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains("split a quantization block"));
        }
    }

    #[test]
    fn transpose_swaps() {
        let t = f32l(&[2, 3, 4]).transpose(0, 2).unwrap();
        assert_eq!(t.dims(), &[4, 3, 2]);
        assert_eq!(t.strides(), &[1, 4, 12]);
        assert_eq!(t.index_to_offset(&[3, 2, 1]).unwrap(), 3 + 8 + 12);
        assert_eq!(f32l(&[2, 3]).transpose(1, 1).unwrap(), f32l(&[2, 3]));
        assert_eq!(
            f32l(&[2, 3]).transpose(0, 2).unwrap_err(),
            TensorError::DimOutOfRange {
                op: "transpose",
                dim: 2,
                rank: 2
            }
        );
        let q = q40(&[2, 3, 64]);
        assert_eq!(q.transpose(0, 1).unwrap().strides(), &[2, 6, 1]);
        assert!(q.transpose(2, 2).is_ok());
        assert!(matches!(
            q.transpose(1, 2),
            Err(TensorError::View {
                op: "transpose",
                reason: MOVES_BLOCK_DIM,
                ..
            })
        ));
    }

    #[test]
    fn permute_reorders() {
        let p = f32l(&[2, 3, 4]).permute(&[2, 0, 1]).unwrap();
        assert_eq!(p.dims(), &[4, 2, 3]);
        assert_eq!(p.strides(), &[1, 12, 4]);
        let l = f32l(&[2, 3, 4]);
        assert!(matches!(
            l.permute(&[0, 1]),
            Err(TensorError::Rank {
                op: "permute",
                rank: 2,
                ..
            })
        ));
        assert_eq!(
            l.permute(&[0, 3, 1]).unwrap_err(),
            TensorError::DimOutOfRange {
                op: "permute",
                dim: 3,
                rank: 3
            }
        );
        assert!(matches!(
            l.permute(&[0, 1, 1]),
            Err(TensorError::View {
                reason: NOT_A_PERMUTATION,
                ..
            })
        ));
        let q = q40(&[2, 3, 32]);
        assert_eq!(q.permute(&[1, 0, 2]).unwrap().dims(), &[3, 2, 32]);
        assert!(matches!(
            q.permute(&[2, 0, 1]),
            Err(TensorError::View {
                reason: MOVES_BLOCK_DIM,
                ..
            })
        ));
    }

    #[test]
    fn squeeze_and_unsqueeze() {
        let l = f32l(&[2, 1, 3]);
        let s = l.squeeze(1).unwrap();
        assert_eq!(s.dims(), &[2, 3]);
        assert_eq!(s.strides(), &[3, 1]);
        assert_eq!(s.unsqueeze(1).unwrap(), l);
        assert_eq!(s.unsqueeze(0).unwrap().strides(), &[6, 3, 1]);
        assert_eq!(s.unsqueeze(2).unwrap().strides(), &[3, 1, 1]);
        assert_eq!(
            s.unsqueeze(3).unwrap_err(),
            TensorError::DimOutOfRange {
                op: "unsqueeze",
                dim: 3,
                rank: 3
            }
        );
        assert_eq!(
            l.squeeze(3).unwrap_err(),
            TensorError::DimOutOfRange {
                op: "squeeze",
                dim: 3,
                rank: 3
            }
        );
        assert!(matches!(
            l.squeeze(0),
            Err(TensorError::View {
                op: "squeeze",
                reason: NOT_SIZE_ONE,
                ..
            })
        ));
        let full = f32l(&[1, 1, 1, 1, 1, 1]);
        assert!(matches!(
            full.unsqueeze(0),
            Err(TensorError::Rank {
                op: "unsqueeze",
                rank: 7,
                ..
            })
        ));
        let scalar = Layout::contiguous(crate::Shape::SCALAR, DType::F32).unwrap();
        assert_eq!(scalar.unsqueeze(0).unwrap().dims(), &[1]);
        assert_eq!(scalar.unsqueeze(0).unwrap().squeeze(0).unwrap(), scalar);
    }

    #[test]
    fn squeeze_unsqueeze_block_dtype() {
        let q = q40(&[1, 64]);
        assert_eq!(q.squeeze(0).unwrap().dims(), &[64]);
        assert_eq!(q.unsqueeze(1).unwrap().dims(), &[1, 1, 64]);
        assert!(matches!(
            q.unsqueeze(2),
            Err(TensorError::View {
                op: "unsqueeze",
                reason: NEW_LAST_DIM,
                ..
            })
        ));
        assert!(matches!(
            q.squeeze(1),
            Err(TensorError::View {
                op: "squeeze",
                reason: DROPS_BLOCK_DIM,
                ..
            })
        ));
    }

    #[test]
    fn select_drops_dim() {
        let l = f32l(&[2, 3, 4]);
        let s = l.select(1, 2).unwrap();
        assert_eq!(s.dims(), &[2, 4]);
        assert_eq!(s.strides(), &[12, 1]);
        assert_eq!(s.offset(), 8);
        assert_eq!(l.select(2, 3).unwrap().strides(), &[12, 4]);
        assert_eq!(
            l.select(3, 0).unwrap_err(),
            TensorError::DimOutOfRange {
                op: "select",
                dim: 3,
                rank: 3
            }
        );
        assert_eq!(
            l.select(1, 3).unwrap_err(),
            TensorError::OutOfBounds {
                op: "select",
                dim: 1,
                start: 3,
                end: 4,
                size: 3
            }
        );
        let q = q40(&[2, 64]);
        assert_eq!(q.select(0, 1).unwrap().offset(), 2);
        assert!(matches!(
            q.select(1, 0),
            Err(TensorError::View {
                op: "select",
                reason: DROPS_BLOCK_DIM,
                ..
            })
        ));
    }
}
