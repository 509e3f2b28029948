//! Broadcasting (numpy rules): [`broadcast_shapes`] and [`Layout::broadcast_to`].
//!
//! Shapes are aligned at their last dim; missing leading dims count as size 1; two sizes
//! agree when they are equal or one of them is 1, and the result takes the other.

use super::Layout;
use crate::error::{Result, TensorError};
use crate::shape::{MAX_RANK, Shape};

/// Why broadcasting the last dim of a block dtype is rejected.
const BROADCASTS_BLOCK_DIM: &str =
    "cannot broadcast the last dim of a block-quantized dtype (blocks run along it)";

/// The shape both `a` and `b` broadcast to under numpy rules.
///
/// Errors: a [`TensorError::Broadcast`] naming `op`, `a` and `b` when some aligned pair of
/// dims differ and neither is 1.
///
/// ```
/// use tempra_tensor::{Shape, broadcast_shapes};
///
/// let a = Shape::new(&[4, 1, 3])?;
/// let b = Shape::new(&[2, 1])?;
/// assert_eq!(broadcast_shapes("add", &a, &b)?, Shape::new(&[4, 2, 3])?);
/// # Ok::<(), tempra_tensor::TensorError>(())
/// ```
pub fn broadcast_shapes(op: &'static str, a: &Shape, b: &Shape) -> Result<Shape> {
    let rank = a.rank().max(b.rank());
    let mut dims = [0; MAX_RANK];
    for i in 0..rank {
        let da = aligned(a, rank, i);
        let db = aligned(b, rank, i);
        dims[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(TensorError::Broadcast {
                op,
                lhs: *a,
                rhs: *b,
            });
        };
    }
    Shape::new(&dims[..rank])
}

/// Dim `i` of `shape` right-aligned to `rank` dims (1 where `shape` has no such dim).
fn aligned(shape: &Shape, rank: usize, i: usize) -> usize {
    let lead = rank - shape.rank();
    if i < lead { 1 } else { shape.dims()[i - lead] }
}

impl Layout {
    /// The view of this layout broadcast to `shape` (numpy rules): new leading dims and
    /// size-1 dims that grow get stride 0; other dims must match.
    ///
    /// Errors: a `shape` of lower rank, or a dim that differs and is not 1 here, is a
    /// [`TensorError::Broadcast`] (this shape, `shape`); a `shape` whose element count
    /// overflows is a [`TensorError::Overflow`]; broadcasting the last dim of a block dtype
    /// is a [`TensorError::View`].
    pub fn broadcast_to(&self, shape: Shape) -> Result<Layout> {
        const OP: &str = "broadcast_to";
        let rank = shape.rank();
        let old_rank = self.rank();
        let err = TensorError::Broadcast {
            op: OP,
            lhs: self.shape,
            rhs: shape,
        };
        if rank < old_rank {
            return Err(err);
        }
        let lead = rank - old_rank;
        let mut strides = [0; MAX_RANK];
        for (d, &new) in shape.dims().iter().enumerate().skip(lead) {
            let old = self.dims()[d - lead];
            strides[d] = if old == new {
                self.strides[d - lead]
            } else if old == 1 {
                0
            } else {
                return Err(err);
            };
        }
        if shape.checked_elem_count().is_none() {
            return Err(TensorError::Overflow { op: OP, shape });
        }
        // A block dtype's last dim is a multiple of the block length, never 1, so it
        // can only be broadcast by a bug upstream; check rather than assume.
        if self.dtype.is_quantized() && strides[rank - 1] != 1 {
            return Err(self.view_err(OP, BROADCASTS_BLOCK_DIM));
        }
        Ok(Layout {
            shape,
            strides,
            ..*self
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32l, sh};
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn broadcast_shapes_numpy_rules() {
        let b = |x: &[usize], y: &[usize]| broadcast_shapes("t", &sh(x), &sh(y));
        assert_eq!(b(&[2, 3], &[3]).unwrap(), sh(&[2, 3]));
        assert_eq!(b(&[3], &[2, 3]).unwrap(), sh(&[2, 3]));
        assert_eq!(b(&[5, 1, 4], &[3, 1]).unwrap(), sh(&[5, 3, 4]));
        assert_eq!(b(&[], &[2, 2]).unwrap(), sh(&[2, 2]));
        assert_eq!(b(&[1], &[0]).unwrap(), sh(&[0]));
        assert_eq!(b(&[], &[]).unwrap(), Shape::SCALAR);
        assert_eq!(
            b(&[2, 3], &[4]).unwrap_err(),
            TensorError::Broadcast {
                op: "t",
                lhs: sh(&[2, 3]),
                rhs: sh(&[4])
            }
        );
        assert!(b(&[2, 1], &[3, 0]).is_err());
    }

    #[test]
    fn broadcast_to_strides() {
        let l = f32l(&[3, 1]).broadcast_to(sh(&[2, 3, 4])).unwrap();
        assert_eq!(l.strides(), &[0, 1, 0]);
        assert_eq!(l.index_to_offset(&[1, 2, 3]).unwrap(), 2);
        assert_eq!(l.units_spanned(), 3);
        assert!(!l.is_contiguous());
        // Same shape: unchanged. New leading size-1 dims keep it contiguous.
        assert_eq!(
            f32l(&[2, 3]).broadcast_to(sh(&[2, 3])).unwrap(),
            f32l(&[2, 3])
        );
        assert!(
            f32l(&[2, 3])
                .broadcast_to(sh(&[1, 2, 3]))
                .unwrap()
                .is_contiguous()
        );
        let s = Layout::contiguous(Shape::SCALAR, DType::F32).unwrap();
        assert_eq!(s.broadcast_to(sh(&[2, 2])).unwrap().strides(), &[0, 0]);
    }

    #[test]
    fn broadcast_to_errors() {
        let l = f32l(&[2, 3]);
        assert_eq!(
            l.broadcast_to(sh(&[3])).unwrap_err(),
            TensorError::Broadcast {
                op: "broadcast_to",
                lhs: sh(&[2, 3]),
                rhs: sh(&[3])
            }
        );
        assert!(matches!(
            l.broadcast_to(sh(&[2, 4])),
            Err(TensorError::Broadcast { .. })
        ));
        assert!(matches!(
            f32l(&[1, 1]).broadcast_to(sh(&[usize::MAX, 2])),
            Err(TensorError::Overflow {
                op: "broadcast_to",
                ..
            })
        ));
    }

    #[test]
    fn broadcast_to_block_dtype() {
        let q = Layout::contiguous(sh(&[1, 64]), DType::Q8_0).unwrap();
        let b = q.broadcast_to(sh(&[3, 4, 64])).unwrap();
        assert_eq!(b.strides(), &[0, 0, 1]);
        assert_eq!(b.index_to_offset(&[2, 3, 33]).unwrap(), 1);
        assert!(matches!(
            q.broadcast_to(sh(&[1, 128])),
            Err(TensorError::Broadcast { .. })
        ));
        // A (hand-built, invalid-for-blocks) size-1 last dim is still refused.
        let odd = Layout {
            shape: sh(&[2, 1]),
            strides: [1, 1, 0, 0, 0, 0],
            offset: 0,
            dtype: DType::Q8_0,
        };
        assert!(matches!(
            odd.broadcast_to(sh(&[2, 32])),
            Err(TensorError::View {
                reason: BROADCASTS_BLOCK_DIM,
                ..
            })
        ));
    }
}
