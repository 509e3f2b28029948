//! Element access for the reference kernels: read any plain host value as f64 at a
//! storage unit, write f64s into a contiguous output, walk multi-indices.

use std::borrow::Cow;

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::quant;
use crate::tensor::Tensor;

/// Reads the values of a host tensor, at any alignment. A backend's prepared weight is
/// read in its dtype's own layout, converted back once per reader.
pub(crate) struct Reader<'a> {
    bytes: Cow<'a, [u8]>,
    dtype: DType,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(t: &'a Tensor) -> Result<Self> {
        let bytes = if t.storage().prepared().is_some() {
            let mut bytes = vec![0u8; t.layout().bytes_spanned()];
            t.storage().read_bytes(0, &mut bytes)?;
            Cow::Owned(bytes)
        } else {
            Cow::Borrowed(t.storage().host_bytes()?)
        };
        Ok(Self {
            bytes,
            dtype: t.dtype(),
        })
    }

    /// The storage's bytes (from storage unit 0 on).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The value at storage unit `unit` (plain dtypes).
    #[inline]
    pub(crate) fn get(&self, unit: usize) -> f64 {
        let at = |n: usize| &self.bytes[unit * n..unit * n + n];
        match self.dtype {
            DType::F64 => bytemuck::pod_read_unaligned::<f64>(at(8)),
            DType::F32 => bytemuck::pod_read_unaligned::<f32>(at(4)) as f64,
            DType::F16 => bytemuck::pod_read_unaligned::<half::f16>(at(2)).to_f64(),
            DType::BF16 => bytemuck::pod_read_unaligned::<half::bf16>(at(2)).to_f64(),
            DType::I32 => bytemuck::pod_read_unaligned::<i32>(at(4)) as f64,
            DType::U32 => bytemuck::pod_read_unaligned::<u32>(at(4)) as f64,
            DType::U8 => self.bytes[unit] as f64,
            // Block dtypes are read through `dequantize_block`; kernels never call `get`
            // on them (the context's dtype checks route them there).
            _ => f64::NAN,
        }
    }

    /// Dequantizes the block at storage unit `unit` into `dst` (block dtypes).
    pub(crate) fn dequantize_block(&self, unit: usize, dst: &mut [f32]) -> Result<()> {
        let bb = self.dtype.block_bytes();
        quant::dequantize_row(self.dtype, &self.bytes[unit * bb..(unit + 1) * bb], dst)
    }
}

/// Writes f64 values converted to the dtype of a host tensor.
pub(crate) struct Writer<'a> {
    bytes: &'a mut [u8],
    dtype: DType,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(t: &'a mut Tensor) -> Result<Self> {
        let dtype = t.dtype();
        Ok(Self {
            bytes: t.host_slice_mut::<u8>()?,
            dtype,
        })
    }

    /// Writes `v` at storage unit `unit` (plain dtypes).
    #[inline]
    pub(crate) fn set(&mut self, unit: usize, v: f64) {
        let n = self.dtype.block_bytes();
        let dst = &mut self.bytes[unit * n..unit * n + n];
        match self.dtype {
            DType::F64 => dst.copy_from_slice(&v.to_le_bytes()),
            DType::F32 => dst.copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => dst.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => dst.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::I32 => dst.copy_from_slice(&(v as i32).to_le_bytes()),
            DType::U32 => dst.copy_from_slice(&(v as u32).to_le_bytes()),
            DType::U8 => dst[0] = v as u8,
            _ => {}
        }
    }

    /// The value at storage unit `unit` (plain dtypes), for in-place updates.
    #[inline]
    pub(crate) fn get(&self, unit: usize) -> f64 {
        Reader {
            bytes: Cow::Borrowed(&*self.bytes),
            dtype: self.dtype,
        }
        .get(unit)
    }

    /// The raw bytes of storage unit `unit` (block dtypes: one block).
    pub(crate) fn unit_bytes(&mut self, unit: usize) -> &mut [u8] {
        let n = self.dtype.block_bytes();
        &mut self.bytes[unit * n..unit * n + n]
    }
}

/// The storage unit of logical `index` in `t` (plain dtypes), from its strides.
#[inline]
pub(crate) fn unit_of(t: &Tensor, index: &[usize]) -> usize {
    let l = t.layout();
    l.offset()
        + index
            .iter()
            .zip(l.strides())
            .map(|(i, s)| i * s)
            .sum::<usize>()
}

/// Advances a row-major multi-index over `dims`; false once it wraps past the end.
#[inline]
pub(crate) fn next_index(index: &mut [usize], dims: &[usize]) -> bool {
    for d in (0..dims.len()).rev() {
        index[d] += 1;
        if index[d] < dims[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

/// An error for a case the reference backend does not handle.
pub(crate) fn unsupported(op: &'static str, what: String) -> TensorError {
    TensorError::Unsupported {
        op,
        backend: "reference",
        what,
    }
}
