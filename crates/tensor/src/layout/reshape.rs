//! `reshape`: a new shape over the same elements in the same row-major order, as a view.
//!
//! A contiguous layout reshapes to anything with the same element count. A non-contiguous
//! one follows PyTorch's `view` rule: its dims fall into *chunks* of dims that are
//! contiguous with each other (`stride[d] == size[d + 1] * stride[d + 1]`); the new shape
//! may split and merge dims inside a chunk, but no new dim may straddle two chunks.

use super::{Layout, check_block_shape, contiguous_strides, unit_dims};
use crate::error::{Result, TensorError};
use crate::shape::{MAX_RANK, Shape};

/// Why a reshape that is not expressible as a view is rejected.
const NEEDS_CONTIGUOUS: &str = "the new shape merges or splits dims that are not contiguous \
                                with each other; make the tensor contiguous first";

impl Layout {
    /// The view of the same elements (row-major order) with shape `shape`.
    ///
    /// For a block dtype the new last dim must be a multiple of the block length too; the
    /// rule is then applied to the shape in blocks.
    ///
    /// Errors: a different element count is a [`TensorError::ShapeMismatch`] (old shape,
    /// new shape); a block dtype whose new last dim is not a multiple of the block length,
    /// or a non-contiguous layout the new shape cannot view, is a [`TensorError::View`];
    /// contiguous strides that overflow are a [`TensorError::Overflow`].
    pub fn reshape(&self, shape: Shape) -> Result<Layout> {
        const OP: &str = "reshape";
        if shape.checked_elem_count() != Some(self.elem_count()) {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape,
                rhs: shape,
            });
        }
        check_block_shape(OP, &shape, self.dtype)?;
        let new_units = unit_dims(&shape, self.dtype);
        let new_units = &new_units[..shape.rank()];
        let strides = if self.is_contiguous() {
            contiguous_strides(OP, &shape, new_units)?
        } else {
            let old_units = self.unit_dims();
            let mut strides = view_strides(&old_units[..self.rank()], self.strides(), new_units)
                .ok_or(self.view_err(OP, NEEDS_CONTIGUOUS))?;
            if self.dtype.is_quantized() {
                // The blocks of the new last dim must be adjacent, as in every block
                // layout. They can fail to be when merged dims were broadcast: [3, 32]
                // broadcast from [1, 32] merges to [96] only with block stride 0.
                let last = shape.rank() - 1;
                if new_units[last] > 1 && strides[last] != 1 {
                    return Err(self.view_err(OP, NEEDS_CONTIGUOUS));
                }
                strides[last] = 1;
            }
            strides
        };
        Ok(Layout {
            shape,
            strides,
            ..*self
        })
    }
}

/// Strides that view a non-empty, rank ≥ 1 layout (`old`, `old_strides`, in units) with
/// dims `new`, or `None` when a new dim would straddle two chunks of contiguous old dims.
/// The same algorithm as PyTorch's `computeStride`.
fn view_strides(old: &[usize], old_strides: &[usize], new: &[usize]) -> Option<[usize; MAX_RANK]> {
    let mut out = [0; MAX_RANK];
    // `view_d` counts the new dims not yet given a stride (they are `new[..view_d]`).
    let mut view_d = new.len();
    let mut chunk_base = *old_strides.last()?;
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for td in (0..old.len()).rev() {
        tensor_numel = tensor_numel.checked_mul(old[td])?;
        let chunk_ends = td == 0
            || (old[td - 1] != 1
                && Some(old_strides[td - 1]) != tensor_numel.checked_mul(chunk_base));
        if chunk_ends {
            while view_d > 0 && (view_numel < tensor_numel || new[view_d - 1] == 1) {
                out[view_d - 1] = view_numel.saturating_mul(chunk_base);
                view_numel = view_numel.checked_mul(new[view_d - 1])?;
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if td > 0 {
                chunk_base = old_strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32l, sh};
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn reshape_contiguous() {
        let l = f32l(&[2, 3, 4]).reshape(sh(&[6, 4])).unwrap();
        assert_eq!(l.strides(), &[4, 1]);
        let n = f32l(&[4, 6])
            .narrow(0, 1, 2)
            .unwrap()
            .reshape(sh(&[3, 4]))
            .unwrap();
        assert_eq!(n.offset(), 6);
        assert_eq!(n.strides(), &[4, 1]);
        let s = f32l(&[1]).reshape(Shape::SCALAR).unwrap();
        assert_eq!(s.rank(), 0);
        assert_eq!(s.reshape(sh(&[1, 1])).unwrap().dims(), &[1, 1]);
        let e = f32l(&[0, 3]).reshape(sh(&[3, 0, 5])).unwrap();
        assert_eq!(e.strides(), &[0, 5, 1]);
    }

    #[test]
    fn reshape_view_rule_non_contiguous() {
        // [4, 6] narrowed to [4, 4] (row stride 6): rows are separate chunks, so splitting
        // the columns is a view, merging rows is not.
        let n = f32l(&[4, 6]).narrow(1, 1, 4).unwrap();
        let v = n.reshape(sh(&[4, 2, 2])).unwrap();
        assert_eq!(v.strides(), &[6, 2, 1]);
        assert_eq!(v.offset(), 1);
        let v = n.reshape(sh(&[2, 2, 4])).unwrap();
        assert_eq!(v.strides(), &[12, 6, 1]);
        assert!(matches!(
            n.reshape(sh(&[16])),
            Err(TensorError::View {
                op: "reshape",
                reason: NEEDS_CONTIGUOUS,
                ..
            })
        ));
        // A transposed tensor can still split its (now outer) dims.
        let t = f32l(&[6, 4]).transpose(0, 1).unwrap(); // [4, 6] strides [1, 4]
        let v = t.reshape(sh(&[2, 2, 3, 2])).unwrap();
        assert_eq!(v.strides(), &[2, 1, 8, 4]);
        let e = t.reshape(sh(&[24])).unwrap_err();
        assert!(
            e.to_string().contains("make the tensor contiguous first"),
            "{e}"
        );
        // Size-1 dims can be added and dropped anywhere.
        let v = t.reshape(sh(&[1, 4, 1, 6, 1])).unwrap();
        assert_eq!(v.reshape(sh(&[4, 6])).unwrap().strides(), &[1, 4]);
        // Broadcast dims merge with each other.
        let b = f32l(&[3]).broadcast_to(sh(&[2, 2, 3])).unwrap();
        let v = b.reshape(sh(&[4, 3])).unwrap();
        assert_eq!(v.strides(), &[0, 1]);
        assert!(b.reshape(sh(&[12])).is_err());
    }

    #[test]
    fn reshape_errors() {
        let l = f32l(&[2, 3]);
        assert_eq!(
            l.reshape(sh(&[7])).unwrap_err(),
            TensorError::ShapeMismatch {
                op: "reshape",
                lhs: sh(&[2, 3]),
                rhs: sh(&[7])
            }
        );
        assert!(matches!(
            l.reshape(sh(&[usize::MAX, 3])),
            Err(TensorError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            f32l(&[0]).reshape(sh(&[0, usize::MAX, usize::MAX])),
            Err(TensorError::Overflow { op: "reshape", .. })
        ));
    }

    #[test]
    fn reshape_block_dtype() {
        let q = Layout::contiguous(sh(&[4, 64]), DType::Q4_0).unwrap();
        assert_eq!(q.reshape(sh(&[256])).unwrap().strides(), &[1]);
        assert_eq!(q.reshape(sh(&[8, 32])).unwrap().strides(), &[1, 1]);
        assert_eq!(q.reshape(sh(&[2, 2, 64])).unwrap().strides(), &[4, 2, 1]);
        assert!(matches!(
            q.reshape(sh(&[128, 2])),
            Err(TensorError::View { op: "reshape", .. })
        ));
        assert!(matches!(q.reshape(sh(&[2, 128])), Ok(l) if l.strides() == [4, 1]));
        // Non-contiguous: rows 0 and 2 of each pair; row blocks still split.
        let n = Layout::contiguous(sh(&[4, 128]), DType::Q4_0)
            .unwrap()
            .narrow(1, 0, 64)
            .unwrap();
        let v = n.reshape(sh(&[4, 2, 32])).unwrap();
        assert_eq!(v.strides(), &[4, 1, 1]);
        assert_eq!(v.index_to_offset(&[3, 1, 5]).unwrap(), 13);
        assert!(matches!(
            n.reshape(sh(&[256])),
            Err(TensorError::View {
                reason: NEEDS_CONTIGUOUS,
                ..
            })
        ));
        // Merging broadcast rows into the block dim would need block stride 0.
        let b = Layout::contiguous(sh(&[1, 32]), DType::Q4_0)
            .unwrap()
            .broadcast_to(sh(&[3, 2, 32]))
            .unwrap();
        assert!(matches!(
            b.reshape(sh(&[192])),
            Err(TensorError::View {
                reason: NEEDS_CONTIGUOUS,
                ..
            })
        ));
        assert_eq!(b.reshape(sh(&[6, 32])).unwrap().strides(), &[0, 1]);
        assert_eq!(b.reshape(sh(&[6, 1, 32])).unwrap().strides(), &[0, 1, 1]);
    }
}
