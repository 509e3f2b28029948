//! `Tensor`: refcounted storage plus a layout. Cheap to clone; every view shares storage.

use std::borrow::Cow;
use std::sync::Arc;

use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Result, TensorError};
use crate::layout::{Layout, StridedIndex};
use crate::quant;
use crate::shape::Shape;
use crate::storage::{Storage, cast_host, cast_host_mut};

/// A tensor: `Arc`'d [`Storage`] plus a [`Layout`] (shape, strides, offset, dtype).
///
/// Non-generic over backends: the storage kind is a closed enum and backends work behind
/// the [`crate::Backend`] trait, so user code never spells a backend type. Cloning and
/// every view (`narrow`, `reshape`, `transpose`, ...) share the storage; a view may outlive
/// its parent; when the last one drops, a pooled block returns to its pool.
#[derive(Clone)]
pub struct Tensor {
    storage: Arc<Storage>,
    layout: Layout,
}

impl Tensor {
    /// A tensor over `storage` with `layout`; errors when the layout addresses bytes past
    /// the end of the storage.
    pub fn new(storage: Arc<Storage>, layout: Layout) -> Result<Tensor> {
        let needed = layout.bytes_spanned();
        if needed > storage.byte_len() {
            return Err(TensorError::Argument {
                op: "tensor",
                name: "layout",
                reason: format!(
                    "{layout} spans {needed} bytes but the {} storage holds {}",
                    storage.kind(),
                    storage.byte_len()
                ),
            });
        }
        Ok(Tensor { storage, layout })
    }

    /// A tensor taking ownership of `storage`.
    pub fn from_storage(storage: Storage, layout: Layout) -> Result<Tensor> {
        Tensor::new(Arc::new(storage), layout)
    }

    /// A contiguous tensor of `shape` and `dtype` in an owned (not pooled), zeroed host
    /// buffer: for session-lifetime state such as KV caches and converted weights.
    pub fn owned_zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
        let layout = Layout::contiguous(Shape::new(shape)?, dtype)?;
        Tensor::from_storage(Storage::owned_zeroed(layout.bytes_spanned())?, layout)
    }

    /// A contiguous tensor copying `data` into an owned (not pooled) host buffer.
    pub fn owned_from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        let mut t = Tensor::owned_zeros(shape, T::DTYPE)?;
        let expected = t.elem_count();
        if data.len() != expected {
            return Err(TensorError::DataLength {
                op: "owned_from_slice",
                got: data.len(),
                expected,
                shape: *t.shape(),
            });
        }
        t.host_slice_mut::<T>()?[..expected].copy_from_slice(data);
        Ok(t)
    }

    /// The layout.
    #[inline]
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &Shape {
        self.layout.shape()
    }

    /// The dimensions.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    /// The rank.
    #[inline]
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// The number of elements.
    #[inline]
    pub fn elem_count(&self) -> usize {
        self.layout.elem_count()
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.layout.dtype()
    }

    /// Whether the layout is dense row-major.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// The storage.
    #[inline]
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Whether `self` and `other` share one storage.
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// How many tensors (views) share this storage.
    pub fn storage_refs(&self) -> usize {
        Arc::strong_count(&self.storage)
    }

    /// Whether this tensor is the only one holding its storage (so it may be updated in
    /// place without anyone seeing it).
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.storage) == 1 && Arc::weak_count(&self.storage) == 0
    }

    /// The storage, writable, only when this tensor is its only holder.
    pub fn storage_mut(&mut self) -> Option<&mut Storage> {
        Arc::get_mut(&mut self.storage)
    }

    /// The whole storage's host bytes viewed as `T`s (the layout's offset and strides
    /// index into this, in units of `T` for plain dtypes).
    pub fn host_slice<T: bytemuck::Pod>(&self) -> Result<&[T]> {
        cast_host("host_slice", self.storage.host_bytes()?)
    }

    /// The whole storage's host bytes viewed as `T`s, writable; only when this tensor is
    /// the storage's only holder (in-place updates never touch shared memory).
    pub fn host_slice_mut<T: bytemuck::Pod>(&mut self) -> Result<&mut [T]> {
        // `ok_or_else`: the error's message is built (allocated) only on failure, not on
        // every write of every op's output.
        let storage = Arc::get_mut(&mut self.storage).ok_or_else(|| TensorError::Argument {
            op: "host_slice_mut",
            name: "storage",
            reason: "shared by other tensors; writes need unique storage".into(),
        })?;
        cast_host_mut("host_slice_mut", storage.host_bytes_mut()?)
    }

    /// Swaps in another layout over the same storage, returning the old one. Only for
    /// the exec layer, with a layout it checked lies inside the storage (a region of it).
    pub(crate) fn replace_layout(&mut self, layout: Layout) -> Layout {
        std::mem::replace(&mut self.layout, layout)
    }

    /// Makes this handle view the contiguous region of `dims` (its dtype) that starts
    /// `offset` storage units into its storage, in place: no new handle, no refcount
    /// change. A step arena uses it to point one long-lived buffer at a step's rows and
    /// shape. Only this handle's view changes; other views of the storage keep theirs.
    ///
    /// Errors: a shape invalid for the dtype, or a region past the end of the storage.
    pub fn set_view(&mut self, offset: usize, dims: &[usize]) -> Result<()> {
        let contiguous = Layout::contiguous(Shape::new(dims)?, self.dtype())?;
        let layout = Layout::from_parts(
            *contiguous.shape(),
            contiguous.strides(),
            offset,
            self.dtype(),
        )?;
        let needed = layout.bytes_spanned();
        if needed > self.storage.byte_len() {
            return Err(TensorError::Argument {
                op: "set_view",
                name: "region",
                reason: format!(
                    "{layout} spans {needed} bytes but the {} storage holds {}",
                    self.storage.kind(),
                    self.storage.byte_len()
                ),
            });
        }
        self.layout = layout;
        Ok(())
    }

    fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor {
            storage: Arc::clone(&self.storage),
            layout,
        }
    }

    /// A view of `len` entries of dim `dim` starting at `start`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.narrow(dim, start, len)?))
    }

    /// A view with a new shape of the same element count; an error when the layout cannot
    /// express it without a copy (make the tensor contiguous first).
    pub fn reshape(&self, dims: &[usize]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.reshape(Shape::new(dims)?)?))
    }

    /// A view broadcast to `dims` (stride 0 along expanded dims).
    pub fn broadcast_to(&self, dims: &[usize]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.broadcast_to(Shape::new(dims)?)?))
    }

    /// A view with dims `d0` and `d1` swapped.
    pub fn transpose(&self, d0: usize, d1: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.transpose(d0, d1)?))
    }

    /// A view with the last two dims swapped.
    pub fn t(&self) -> Result<Tensor> {
        let r = self.rank();
        if r < 2 {
            return Err(TensorError::Rank {
                op: "t",
                rank: r,
                what: "at least 2",
            });
        }
        self.transpose(r - 2, r - 1)
    }

    /// A view with dims reordered: dim `i` of the result is dim `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.permute(perm)?))
    }

    /// A view without dim `dim` (which must have size 1).
    pub fn squeeze(&self, dim: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.squeeze(dim)?))
    }

    /// A view with a new size-1 dim at `dim`.
    pub fn unsqueeze(&self, dim: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.unsqueeze(dim)?))
    }

    /// A view of index `index` along `dim`, without that dim.
    pub fn select(&self, dim: usize, index: usize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.select(dim, index)?))
    }

    /// The bytes this tensor's layout spans, on the host (borrowed for host storage, read
    /// back for device storage).
    fn spanned_host_bytes(&self) -> Result<Cow<'_, [u8]>> {
        let spanned = self.layout.bytes_spanned();
        if self.storage.is_host() {
            let bytes = self.storage.host_bytes()?;
            return Ok(Cow::Borrowed(&bytes[..spanned]));
        }
        let mut bytes = vec![0u8; spanned];
        self.storage.read_bytes(0, &mut bytes)?;
        Ok(Cow::Owned(bytes))
    }

    /// Every element in row-major order as f64 (block formats are dequantized).
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        let mut out = Vec::with_capacity(self.elem_count());
        self.for_each_value(|v| out.push(v))?;
        Ok(out)
    }

    /// Every element in row-major order as f32 (block formats are dequantized).
    pub fn to_vec_f32(&self) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(self.elem_count());
        self.for_each_value(|v| out.push(v as f32))?;
        Ok(out)
    }

    /// Every element in row-major order as `T`, which must be this tensor's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::DTypeMismatch {
                op: "to_vec",
                lhs: self.dtype(),
                rhs: T::DTYPE,
            });
        }
        let bytes = self.spanned_host_bytes()?;
        let data: Cow<'_, [T]> = match bytemuck::try_cast_slice::<u8, T>(&bytes) {
            Ok(slice) => Cow::Borrowed(slice),
            Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(&bytes)),
        };
        Ok(StridedIndex::new(&self.layout).map(|i| data[i]).collect())
    }

    /// Calls `f` with every element in row-major order, as f64.
    fn for_each_value(&self, mut f: impl FnMut(f64)) -> Result<()> {
        let dtype = self.dtype();
        let bytes = self.spanned_host_bytes()?;
        if dtype.is_quantized() {
            let (bl, bb) = (dtype.block_len(), dtype.block_bytes());
            let mut block = [0f32; 256];
            for unit in StridedIndex::new(&self.layout) {
                let src = &bytes[unit * bb..(unit + 1) * bb];
                quant::dequantize_row(dtype, src, &mut block[..bl])?;
                block[..bl].iter().for_each(|&v| f(v as f64));
            }
            return Ok(());
        }
        crate::with_element_type!(dtype, T => {
            let data: Cow<'_, [T]> = match bytemuck::try_cast_slice::<u8, T>(&bytes) {
                Ok(slice) => Cow::Borrowed(slice),
                Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(&bytes)),
            };
            for i in StridedIndex::new(&self.layout) {
                f(data[i].to_f64());
            }
            Ok(())
        }, _ => unreachable!("block dtypes handled above"))
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("layout", &self.layout)
            .field("storage", &*self.storage)
            .field("refs", &self.storage_refs())
            .finish()
    }
}
