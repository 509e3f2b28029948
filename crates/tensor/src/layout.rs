//! `Layout`: how a tensor's logical elements map onto storage units.
//!
//! A layout is shape + strides + offset + dtype, all inline and `Copy`: every view op
//! (`narrow`, `transpose`, `permute`, `reshape`, `broadcast_to`, `squeeze`, `unsqueeze`,
//! `select`) is arithmetic on these numbers and never touches or allocates memory.
//!
//! The file is split by idea:
//! - this file: the type, its invariants, constructors, accessors and formatting;
//! - `views`: narrow, transpose, permute, squeeze, unsqueeze, select;
//! - `reshape`: reshape, including the view rule for non-contiguous layouts;
//! - `broadcast`: [`broadcast_shapes`] and [`Layout::broadcast_to`];
//! - `strided_index`: the iterators kernels walk storage with ([`StridedIndex`], [`Runs`]).

mod broadcast;
mod reshape;
mod strided_index;
mod views;

/// Re-exported here because layouts are where the rank limit bites.
pub use crate::shape::MAX_RANK;
pub use broadcast::broadcast_shapes;
pub use strided_index::{Runs, StridedIndex};

use std::fmt;
use std::ops::Range;

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::Shape;

/// Why a block-quantized shape is rejected.
const BLOCK_LAST_DIM: &str =
    "the last dim of a block-quantized dtype must be a multiple of its block length";
/// Why a block-quantized layout's strides are rejected.
const BLOCK_LAST_STRIDE: &str =
    "the last dim of a block-quantized dtype must have stride 1 (one block per block length)";

/// How a tensor's logical elements map onto storage: shape, strides, offset and dtype.
///
/// ```text
/// #[derive(Clone, Copy, PartialEq, Eq, Hash)]
/// pub struct Layout { shape: Shape, strides: [usize; MAX_RANK], offset: usize, dtype: DType }
/// ```
///
/// - The **shape** is in logical elements.
/// - **Strides** and the **offset** are in *storage units*. For plain dtypes a unit is one
///   element. For block-quantized dtypes ([`DType::is_quantized`]) a unit is one block of
///   [`DType::block_len`] elements: blocks run along the last dim, whose size must be a
///   multiple of the block length and whose stride is 1 (one block per `block_len`
///   elements); the strides of the other dims count blocks too.
/// - Broadcast dims have stride 0 (many logical elements share one unit).
///
/// For a plain dtype the element at logical index `(i0, .., ik)` lives in unit
/// `offset + Σ_d i_d * stride_d`. For a block dtype it lives in block
/// `offset + Σ_{d<k} i_d * stride_d + (i_k / block_len) * stride_k`, at position
/// `i_k % block_len` inside that block.
///
/// Invariants kept by every constructor and view: the element count fits in `usize`, and
/// for a non-empty layout so does the highest addressed unit ([`Layout::units_spanned`]),
/// so offset arithmetic on a valid layout never overflows. Strides of dims past the rank
/// are zero, so equal layouts compare and hash equal.
///
/// ```
/// use tempra_tensor::{DType, Layout, Shape};
///
/// let l = Layout::contiguous(Shape::new(&[2, 3])?, DType::F32)?;
/// let t = l.transpose(0, 1)?; // a view: shape [3, 2], strides [1, 3]
/// assert_eq!(t.strides(), &[1, 3]);
/// assert!(!t.is_contiguous());
/// assert_eq!(t.index_to_offset(&[2, 1])?, 5);
/// # Ok::<(), tempra_tensor::TensorError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Shape,
    strides: [usize; MAX_RANK],
    offset: usize,
    dtype: DType,
}

impl Layout {
    /// The row-major contiguous layout of `shape` at offset 0.
    ///
    /// Errors: for a block-quantized dtype, a shape whose last dim is not a multiple of the
    /// block length (or a rank-0 shape) is a [`TensorError::View`]; an element count or
    /// stride that overflows `usize` is a [`TensorError::Overflow`].
    pub fn contiguous(shape: Shape, dtype: DType) -> Result<Layout> {
        const OP: &str = "contiguous";
        check_block_shape(OP, &shape, dtype)?;
        if shape.checked_elem_count().is_none() {
            return Err(TensorError::Overflow { op: OP, shape });
        }
        let units = unit_dims(&shape, dtype);
        let strides = contiguous_strides(OP, &shape, &units[..shape.rank()])?;
        Ok(Layout {
            shape,
            strides,
            offset: 0,
            dtype,
        })
    }

    /// A layout from explicit strides and offset (in storage units), validated.
    ///
    /// Errors: `strides.len() != shape.rank()` is a [`TensorError::Rank`]; for a block
    /// dtype, a last dim that is not a multiple of the block length or a last stride other
    /// than 1 is a [`TensorError::View`]; an element count or highest addressed unit that
    /// overflows `usize` is a [`TensorError::Overflow`].
    pub fn from_parts(
        shape: Shape,
        strides: &[usize],
        offset: usize,
        dtype: DType,
    ) -> Result<Layout> {
        const OP: &str = "from_parts";
        let rank = shape.rank();
        if strides.len() != rank {
            return Err(TensorError::Rank {
                op: OP,
                rank: strides.len(),
                what: "one stride per dim of the shape",
            });
        }
        check_block_shape(OP, &shape, dtype)?;
        if dtype.is_quantized() && strides[rank - 1] != 1 {
            return Err(view_err(OP, shape, BLOCK_LAST_STRIDE));
        }
        if shape.checked_elem_count().is_none() {
            return Err(TensorError::Overflow { op: OP, shape });
        }
        let mut all = [0; MAX_RANK];
        all[..rank].copy_from_slice(strides);
        let layout = Layout {
            shape,
            strides: all,
            offset,
            dtype,
        };
        layout
            .checked_units_spanned()
            .ok_or(TensorError::Overflow { op: OP, shape })?;
        Ok(layout)
    }

    /// The shape, in logical elements.
    #[inline]
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The dims, in logical elements, outermost first.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The strides in storage units, one per dim.
    #[inline]
    pub fn strides(&self) -> &[usize] {
        &self.strides[..self.shape.rank()]
    }

    /// The storage unit of the first element (in units, not bytes).
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of dims.
    #[inline]
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// The number of logical elements (1 for a scalar).
    #[inline]
    pub fn elem_count(&self) -> usize {
        self.shape.elem_count()
    }

    /// The number of logical storage units: [`Self::elem_count`] for plain dtypes, the
    /// number of blocks (`elem_count / block_len`) for block dtypes. Broadcast units count
    /// once per logical position.
    #[inline]
    pub fn unit_count(&self) -> usize {
        self.elem_count() / self.dtype.block_len()
    }

    /// The shape in storage units: the shape with the last dim divided by the block
    /// length (the shape itself for plain dtypes). [`Self::strides`] index this shape.
    pub fn unit_shape(&self) -> Shape {
        let mut shape = self.shape;
        if let Some(last) = shape.dims_mut().last_mut() {
            *last /= self.dtype.block_len();
        }
        shape
    }

    /// Whether the layout is row-major dense in storage units (an empty layout is). Strides
    /// of size-1 dims are ignored and the offset may be anything.
    pub fn is_contiguous(&self) -> bool {
        if self.elem_count() == 0 {
            return true;
        }
        let units = self.unit_dims();
        let mut expected = 1usize;
        for d in (0..self.rank()).rev() {
            if units[d] == 1 {
                continue;
            }
            if self.strides[d] != expected {
                return false;
            }
            expected = expected.saturating_mul(units[d]);
        }
        true
    }

    /// The number of storage units from unit 0 needed to hold every addressed unit:
    /// `offset + max index + 1`, or 0 when the layout has no elements.
    pub fn units_spanned(&self) -> usize {
        // Every constructor checks this fits, so the fallback is never taken.
        self.checked_units_spanned().unwrap_or(usize::MAX)
    }

    /// [`Self::units_spanned`] in bytes (`units * dtype.block_bytes()`), saturating.
    pub fn bytes_spanned(&self) -> usize {
        self.units_spanned()
            .saturating_mul(self.dtype.block_bytes())
    }

    /// The range of storage units the layout covers when it is contiguous, else `None`.
    pub fn contiguous_range(&self) -> Option<Range<usize>> {
        if !self.is_contiguous() {
            return None;
        }
        Some(self.offset..self.offset + self.unit_count())
    }

    /// The storage unit holding the element at logical `index` (for block dtypes: the
    /// block; the element sits at position `index[last] % block_len` in it).
    ///
    /// Errors: an index of the wrong length is a [`TensorError::Rank`]; a coordinate past
    /// its dim is a [`TensorError::OutOfBounds`].
    pub fn index_to_offset(&self, index: &[usize]) -> Result<usize> {
        const OP: &str = "index_to_offset";
        let rank = self.rank();
        if index.len() != rank {
            return Err(TensorError::Rank {
                op: OP,
                rank: index.len(),
                what: "one index per dim of the layout",
            });
        }
        let dims = self.dims();
        let bl = self.dtype.block_len();
        let mut offset = self.offset;
        for (d, &i) in index.iter().enumerate() {
            if i >= dims[d] {
                return Err(TensorError::OutOfBounds {
                    op: OP,
                    dim: d,
                    start: i,
                    end: i.saturating_add(1),
                    size: dims[d],
                });
            }
            let unit = if d + 1 == rank { i / bl } else { i };
            // In bounds on a valid (non-empty) layout: cannot overflow.
            offset += unit * self.strides[d];
        }
        Ok(offset)
    }

    /// The dims in storage units, as a fixed array (entries past the rank are 0).
    fn unit_dims(&self) -> [usize; MAX_RANK] {
        unit_dims(&self.shape, self.dtype)
    }

    /// `offset + Σ (unit_dim - 1) * stride + 1`, 0 when empty, `None` on overflow.
    fn checked_units_spanned(&self) -> Option<usize> {
        if self.shape.checked_elem_count()? == 0 {
            return Some(0);
        }
        let units = self.unit_dims();
        let mut last = self.offset;
        for d in 0..self.rank() {
            last = last.checked_add((units[d] - 1).checked_mul(self.strides[d])?)?;
        }
        last.checked_add(1)
    }

    /// The size of `dim`, or a [`TensorError::DimOutOfRange`] naming `op`.
    fn check_dim(&self, op: &'static str, dim: usize) -> Result<usize> {
        self.dims()
            .get(dim)
            .copied()
            .ok_or(TensorError::DimOutOfRange {
                op,
                dim,
                rank: self.rank(),
            })
    }

    /// Whether `dim` is the last dim of a block-quantized layout (the dim blocks run
    /// along, which views may not split, move, broadcast or drop).
    fn is_block_dim(&self, dim: usize) -> bool {
        self.dtype.is_quantized() && dim + 1 == self.rank()
    }

    /// A [`TensorError::View`] for this layout's shape.
    fn view_err(&self, op: &'static str, reason: &'static str) -> TensorError {
        view_err(op, self.shape, reason)
    }
}

/// A [`TensorError::View`].
fn view_err(op: &'static str, shape: Shape, reason: &'static str) -> TensorError {
    TensorError::View { op, shape, reason }
}

/// The dims of `shape` in storage units of `dtype` (last dim divided by the block length).
fn unit_dims(shape: &Shape, dtype: DType) -> [usize; MAX_RANK] {
    let mut units = [0; MAX_RANK];
    let rank = shape.rank();
    units[..rank].copy_from_slice(shape.dims());
    if rank > 0 {
        units[rank - 1] /= dtype.block_len();
    }
    units
}

/// For a block dtype, checks the shape has a last dim that is a multiple of the block
/// length (so rank ≥ 1).
fn check_block_shape(op: &'static str, shape: &Shape, dtype: DType) -> Result<()> {
    if dtype.is_quantized()
        && (shape.rank() == 0 || !shape.last().is_multiple_of(dtype.block_len()))
    {
        return Err(view_err(op, *shape, BLOCK_LAST_DIM));
    }
    Ok(())
}

/// Row-major strides for `units` (dims in storage units); `Overflow` naming `shape` when a
/// stride does not fit in `usize`.
fn contiguous_strides(
    op: &'static str,
    shape: &Shape,
    units: &[usize],
) -> Result<[usize; MAX_RANK]> {
    let mut strides = [0; MAX_RANK];
    let mut acc = 1usize;
    for d in (0..units.len()).rev() {
        strides[d] = acc;
        if d > 0 {
            acc = acc
                .checked_mul(units[d])
                .ok_or(TensorError::Overflow { op, shape: *shape })?;
        }
    }
    Ok(strides)
}

/// A shape from the first `rank` entries of `dims` (rank ≤ `MAX_RANK` by construction).
fn shape_from(dims: &[usize; MAX_RANK], rank: usize) -> Shape {
    Shape::new(&dims[..rank.min(MAX_RANK)]).unwrap_or_default()
}

impl fmt::Debug for Layout {
    /// `Layout { shape: [2, 3], strides: [3, 1], offset: 0, dtype: f32 }`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Layout {{ shape: {}, strides: {:?}, offset: {}, dtype: {} }}",
            self.shape,
            self.strides(),
            self.offset,
            self.dtype
        )
    }
}

impl fmt::Display for Layout {
    /// `f32[2, 3] strides [3, 1] @0`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{} strides {:?} @{}",
            self.dtype,
            self.shape,
            self.strides(),
            self.offset
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn sh(dims: &[usize]) -> Shape {
        Shape::new(dims).unwrap()
    }

    pub(super) fn f32l(dims: &[usize]) -> Layout {
        Layout::contiguous(sh(dims), DType::F32).unwrap()
    }

    #[test]
    fn contiguous_strides_and_accessors() {
        let l = f32l(&[2, 3, 4]);
        assert_eq!(l.dims(), &[2, 3, 4]);
        assert_eq!(l.strides(), &[12, 4, 1]);
        assert_eq!(l.offset(), 0);
        assert_eq!(l.rank(), 3);
        assert_eq!(l.elem_count(), 24);
        assert_eq!(l.unit_count(), 24);
        assert_eq!(l.dtype(), DType::F32);
        assert!(l.is_contiguous());
        assert_eq!(l.units_spanned(), 24);
        assert_eq!(l.bytes_spanned(), 96);
        assert_eq!(l.contiguous_range(), Some(0..24));
        assert_eq!(l.index_to_offset(&[1, 2, 3]).unwrap(), 23);
    }

    #[test]
    fn scalar_and_empty_layouts() {
        let s = Layout::contiguous(Shape::SCALAR, DType::F16).unwrap();
        assert_eq!(s.strides(), &[] as &[usize]);
        assert_eq!(s.elem_count(), 1);
        assert_eq!(s.units_spanned(), 1);
        assert_eq!(s.bytes_spanned(), 2);
        assert_eq!(s.index_to_offset(&[]).unwrap(), 0);
        assert!(s.is_contiguous());

        let e = f32l(&[3, 0, 2]);
        assert_eq!(e.elem_count(), 0);
        assert_eq!(e.units_spanned(), 0);
        assert!(e.is_contiguous());
        assert_eq!(e.contiguous_range(), Some(0..0));
        assert!(e.index_to_offset(&[0, 0, 0]).is_err());
    }

    #[test]
    fn block_dtype_contiguous() {
        let l = Layout::contiguous(sh(&[4, 64]), DType::Q4_0).unwrap();
        assert_eq!(l.strides(), &[2, 1]);
        assert_eq!(l.unit_count(), 8);
        assert_eq!(l.unit_shape(), sh(&[4, 2]));
        assert_eq!(l.units_spanned(), 8);
        assert_eq!(l.bytes_spanned(), 8 * 18);
        assert_eq!(l.contiguous_range(), Some(0..8));
        // Element (3, 40) is in block 3*2 + 40/32 = 7.
        assert_eq!(l.index_to_offset(&[3, 40]).unwrap(), 7);
        let k = Layout::contiguous(sh(&[2, 512]), DType::Q6K).unwrap();
        assert_eq!(k.strides(), &[2, 1]);
    }

    #[test]
    fn contiguous_errors() {
        let e = Layout::contiguous(sh(&[4, 33]), DType::Q4_0).unwrap_err();
        assert!(matches!(
            e,
            TensorError::View {
                op: "contiguous",
                reason: BLOCK_LAST_DIM,
                ..
            }
        ));
        assert!(Layout::contiguous(Shape::SCALAR, DType::Q8_0).is_err());
        let big = sh(&[usize::MAX, 2]);
        assert_eq!(
            Layout::contiguous(big, DType::F32).unwrap_err(),
            TensorError::Overflow {
                op: "contiguous",
                shape: big
            }
        );
        // Empty, but the outer stride would not fit.
        let empty = sh(&[2, usize::MAX, 0, usize::MAX]);
        assert!(matches!(
            Layout::contiguous(empty, DType::F32),
            Err(TensorError::Overflow { .. })
        ));
    }

    #[test]
    fn from_parts_validates() {
        let l = Layout::from_parts(sh(&[3, 2]), &[1, 3], 5, DType::F32).unwrap();
        assert_eq!(l.index_to_offset(&[2, 1]).unwrap(), 10);
        assert_eq!(l.units_spanned(), 11);
        assert!(!l.is_contiguous());
        assert_eq!(l.contiguous_range(), None);

        assert!(matches!(
            Layout::from_parts(sh(&[3, 2]), &[1], 0, DType::F32),
            Err(TensorError::Rank {
                op: "from_parts",
                rank: 1,
                ..
            })
        ));
        assert!(matches!(
            Layout::from_parts(sh(&[3, 48]), &[2, 1], 0, DType::Q8_0),
            Err(TensorError::View {
                reason: BLOCK_LAST_DIM,
                ..
            })
        ));
        assert!(matches!(
            Layout::from_parts(sh(&[3, 64]), &[1, 3], 0, DType::Q8_0),
            Err(TensorError::View {
                reason: BLOCK_LAST_STRIDE,
                ..
            })
        ));
        assert!(matches!(
            Layout::from_parts(sh(&[3, 2]), &[usize::MAX, 1], 0, DType::F32),
            Err(TensorError::Overflow {
                op: "from_parts",
                ..
            })
        ));
        assert!(matches!(
            Layout::from_parts(sh(&[2]), &[1], usize::MAX, DType::F32),
            Err(TensorError::Overflow { .. })
        ));
        // Broadcast strides are fine, even with a huge logical size.
        let b = Layout::from_parts(sh(&[1 << 20, 1 << 20]), &[0, 0], 7, DType::F32).unwrap();
        assert_eq!(b.units_spanned(), 8);
        assert!(!b.is_contiguous());
        // Element count overflow is not.
        assert!(Layout::from_parts(sh(&[usize::MAX, 2]), &[0, 0], 0, DType::F32).is_err());
    }

    #[test]
    fn size_one_strides_are_ignored_by_is_contiguous() {
        let l = Layout::from_parts(sh(&[1, 3, 1, 2]), &[99, 2, 7, 1], 4, DType::F32).unwrap();
        assert!(l.is_contiguous());
        assert_eq!(l.contiguous_range(), Some(4..10));
    }

    #[test]
    fn index_to_offset_errors() {
        let l = f32l(&[2, 3]);
        assert_eq!(
            l.index_to_offset(&[1]).unwrap_err(),
            TensorError::Rank {
                op: "index_to_offset",
                rank: 1,
                what: "one index per dim of the layout"
            }
        );
        assert_eq!(
            l.index_to_offset(&[1, 3]).unwrap_err(),
            TensorError::OutOfBounds {
                op: "index_to_offset",
                dim: 1,
                start: 3,
                end: 4,
                size: 3
            }
        );
        assert!(l.index_to_offset(&[usize::MAX, 0]).is_err());
    }

    #[test]
    fn formatting() {
        let l = f32l(&[2, 3]);
        assert_eq!(
            format!("{l:?}"),
            "Layout { shape: [2, 3], strides: [3, 1], offset: 0, dtype: f32 }"
        );
        assert_eq!(l.to_string(), "f32[2, 3] strides [3, 1] @0");
    }
}
