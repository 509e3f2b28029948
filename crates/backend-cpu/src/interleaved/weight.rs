//! [`InterleavedWeight`]: the storage of a prepared `[N, K]` weight, its rows interleaved
//! by eight in owned host memory (blocks of 2 MiB and more on transparent huge pages).

use std::any::Any;
use std::fmt;

use tempra_tensor::tempra_pool::{HostBlock, HostMemory, Memory};
use tempra_tensor::{PreparedStorage, Result, Storage, Tensor, TensorError};

use super::{InterleavedLayout, ROW_GROUP};

/// The name the CPU backend's prepared storage reports.
const BACKEND_NAME: &str = "cpu";

/// A `[rows, k]` weight of `layout.format()` in `layout`: the storage of the tensor
/// `prepare_weight` returns (its dtype stays the format).
pub struct InterleavedWeight {
    layout: InterleavedLayout,
    rows: usize,
    k: usize,
    memory: HostBlock,
}

impl InterleavedWeight {
    /// Zeroed memory for `rows × k` values of `layout`, or an error when the shape is
    /// not whole groups and blocks or the memory cannot be had.
    pub(crate) fn zeroed(layout: InterleavedLayout, rows: usize, k: usize) -> Result<Self> {
        let op = "prepare_weight";
        let bytes = layout
            .bytes_for(rows, k)
            .ok_or_else(|| TensorError::Argument {
                op,
                name: "w",
                reason: format!("[{rows}, {k}] is not whole groups and blocks of {layout}"),
            })?;
        let memory = HostMemory
            .allocate(bytes.max(1))
            .map_err(|source| TensorError::Pool { op, source })?;
        Ok(InterleavedWeight {
            layout,
            rows,
            k,
            memory,
        })
    }

    /// The interleaved bytes, writable (while the weight is being made).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len();
        &mut self.memory.as_bytes_mut()[..len]
    }

    /// The CPU backend's interleaved weight behind `w`, if `w` is one.
    pub fn of(w: &Tensor) -> Option<&InterleavedWeight> {
        w.storage().prepared()?.as_any().downcast_ref()
    }

    /// The layout.
    pub fn layout(&self) -> InterleavedLayout {
        self.layout
    }

    /// The interleaved bytes, record after record.
    pub fn bytes(&self) -> &[u8] {
        &self.memory.as_bytes()[..self.len()]
    }

    /// Bytes of the interleaved layout.
    fn len(&self) -> usize {
        self.layout.bytes_for(self.rows, self.k).unwrap_or(0)
    }

    /// The interleaved bytes of the view `w` over this weight, from its first group on,
    /// for a `linear` (`op`) whose kernels read whole groups: an error unless the view is
    /// contiguous and starts on a group.
    pub(crate) fn groups_of<'a>(&'a self, op: &'static str, w: &Tensor) -> Result<&'a [u8]> {
        let (n, row_blocks) = (w.dims()[0], self.k / self.layout.format().block_len());
        let group_units = (ROW_GROUP * row_blocks).max(1);
        let offset = w.layout().offset();
        if !w.layout().is_contiguous()
            || !n.is_multiple_of(ROW_GROUP)
            || !offset.is_multiple_of(group_units)
        {
            return Err(TensorError::Argument {
                op,
                name: "w",
                reason: format!(
                    "a weight prepared as {} must be used in whole groups of {ROW_GROUP} rows, \
                     contiguous",
                    self.layout
                ),
            });
        }
        let start = offset / group_units * row_blocks * self.layout.record_bytes();
        Ok(&self.bytes()[start.min(self.len())..])
    }

    /// The tensor of the format over this weight, of `dims`: `[rows, k]`, or a stack of
    /// experts' weights `[experts, rows / experts, k]` (each expert whole groups of rows).
    pub(crate) fn into_tensor(self, dims: &[usize]) -> Result<Tensor> {
        let (last, lead) = dims.split_last().unwrap_or((&0, &[]));
        let per_expert = lead.last().copied().unwrap_or(0);
        if *last != self.k
            || lead.iter().product::<usize>() != self.rows
            || !per_expert.is_multiple_of(ROW_GROUP)
        {
            return Err(TensorError::Argument {
                op: "prepare_weight",
                name: "w",
                reason: format!("{dims:?} over a {self:?} weight"),
            });
        }
        let layout = tempra_tensor::Layout::contiguous(
            tempra_tensor::Shape::new(dims)?,
            self.layout.format(),
        )?;
        Tensor::from_storage(Storage::Prepared(Box::new(self)), layout)
    }
}

impl PreparedStorage for InterleavedWeight {
    fn backend_name(&self) -> &'static str {
        BACKEND_NAME
    }

    fn layout_name(&self) -> &'static str {
        self.layout.name()
    }

    fn byte_len(&self) -> usize {
        self.layout
            .format()
            .bytes_for(self.rows * self.k)
            .unwrap_or(0)
    }

    fn resident_bytes(&self) -> usize {
        self.memory.size()
    }

    fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let total = PreparedStorage::byte_len(self);
        let end = offset
            .checked_add(dst.len())
            .filter(|&e| e <= total)
            .ok_or_else(|| TensorError::Argument {
                op: "read_bytes",
                name: "range",
                reason: format!("{offset}+{} exceeds {total} bytes", dst.len()),
            })?;
        let format = self.layout.format();
        let (bb, row_blocks) = (format.block_bytes(), self.k / format.block_len());
        let bytes = self.bytes();
        let mut block = [0u8; 256];
        // Every block the range touches, converted back whole, its overlap copied.
        for v in offset / bb..end.div_ceil(bb) {
            let (record, r) = self.layout.place(v, row_blocks);
            self.layout.get_block(r, &bytes[record], &mut block[..bb]);
            let (from, to) = (offset.max(v * bb), end.min((v + 1) * bb));
            dst[from - offset..to - offset].copy_from_slice(&block[from - v * bb..to - v * bb]);
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl fmt::Debug for InterleavedWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}, {}]", self.layout, self.rows, self.k)
    }
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;

    use super::super::interleave_rows;
    use super::super::tests::quantized_rows;
    use super::*;

    /// The test weights' shape: two groups, four 256-value blocks per row.
    const ROWS: usize = 16;
    const K: usize = 1024;

    /// A `[ROWS, K]` weight of `layout`'s format, prepared, and its row-major bytes.
    fn weight(layout: InterleavedLayout) -> (Tensor, Vec<u8>) {
        let (rows, k) = (ROWS, K);
        let plain = quantized_rows(layout.format(), rows, k);
        let mut w = InterleavedWeight::zeroed(layout, rows, k).unwrap();
        interleave_rows(layout, rows, k, &plain, w.bytes_mut()).unwrap();
        (w.into_tensor(&[rows, k]).unwrap(), plain)
    }

    #[test]
    fn reads_back_the_formats_bytes_at_any_offset() {
        for layout in InterleavedLayout::ALL {
            let (t, plain) = weight(layout);
            assert_eq!(t.dtype(), layout.format());
            assert_eq!(t.storage().byte_len(), plain.len());
            let p = t.storage().prepared().unwrap();
            assert_eq!((p.backend_name(), p.layout_name()), ("cpu", layout.name()));
            let mut all = vec![0u8; plain.len()];
            t.storage().read_bytes(0, &mut all).unwrap();
            assert_eq!(all, plain, "{layout}");
            // Ranges that start and end inside blocks, across rows and groups.
            for (start, len) in [(1, 3), (17, 400), (plain.len() / 2 - 5, 1000)] {
                let mut part = vec![0u8; len];
                t.storage().read_bytes(start, &mut part).unwrap();
                assert_eq!(part, &plain[start..start + len], "{layout} {start}+{len}");
            }
            assert!(
                t.storage()
                    .read_bytes(plain.len() - 1, &mut [0; 2])
                    .is_err()
            );
            // The values are those of the original.
            let original = Tensor::owned_zeros(&[ROWS, K], layout.format()).unwrap();
            let mut original = original;
            original
                .host_slice_mut::<u8>()
                .unwrap()
                .copy_from_slice(&plain);
            assert_eq!(t.to_vec_f32().unwrap(), original.to_vec_f32().unwrap());
        }
    }

    #[test]
    fn the_prepared_bytes_are_never_taken_for_the_formats() {
        let (t, _) = weight(InterleavedLayout::Q4KR8);
        assert_eq!(t.dtype(), DType::Q4K);
        let err = t.storage().host_bytes().unwrap_err();
        assert!(matches!(err, TensorError::Prepared { .. }), "{err}");
        assert!(err.to_string().contains("q4_K_r8"), "{err}");
        assert!(t.host_slice::<u8>().is_err());
        assert!(!t.storage().is_host());
    }

    #[test]
    fn views_must_be_whole_groups() {
        let (t, _) = weight(InterleavedLayout::Q4_0R8);
        let w = InterleavedWeight::of(&t).unwrap();
        let record = InterleavedLayout::Q4_0R8.record_bytes();
        let group = K / 32 * record;
        assert_eq!(w.groups_of("linear", &t).unwrap().len(), 2 * group);
        let second = t.narrow(0, 8, 8).unwrap();
        assert_eq!(w.groups_of("linear", &second).unwrap().len(), group);
        assert!(w.groups_of("linear", &t.narrow(0, 3, 8).unwrap()).is_err());
        assert!(w.groups_of("linear", &t.narrow(0, 0, 4).unwrap()).is_err());
    }
}
