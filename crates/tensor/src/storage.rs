//! `Storage`: the memory behind a tensor, in one of a closed set of kinds.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tempra_pool::{HostBlock, HostLease, HostMemory, Memory};

use crate::error::{Result, TensorError};
use crate::prepared::PreparedStorage;

/// Memory on a device (a GPU buffer), type-erased so this crate never names a GPU API.
/// The GPU backend implements it; kernels downcast through [`DeviceStorage::as_any`].
pub trait DeviceStorage: Send + Sync + fmt::Debug + 'static {
    /// The name of the backend that owns this memory (e.g. `"wgpu"`).
    fn backend_name(&self) -> &'static str;
    /// Usable bytes.
    fn byte_len(&self) -> usize;
    /// Copies `dst.len()` bytes starting at byte `offset` to the host (a synchronous
    /// read-back, for tests and results).
    fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// The concrete type, for the owning backend's kernels.
    fn as_any(&self) -> &dyn Any;
    /// The concrete type, writable.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Bytes borrowed from an owner that lives as long as the storage: a memory-mapped model
/// file (weights are used zero-copy, straight out of the mapping) or bytes embedded in the
/// binary.
#[derive(Clone)]
pub struct MappedBytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl MappedBytes {
    /// The bytes `start..start + len` of `owner`, or an error when out of range.
    pub fn new(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Result<Self> {
        let total = (*owner).as_ref().len();
        let end = start
            .checked_add(len)
            .filter(|&e| e <= total)
            .ok_or_else(|| TensorError::Argument {
                op: "mapped_bytes",
                name: "range",
                reason: format!("{start}+{len} exceeds the {total} bytes of the mapping"),
            })?;
        let _ = end;
        Ok(Self { owner, start, len })
    }

    /// The borrowed bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }
}

/// The memory behind a tensor.
///
/// - `Pooled`: a transient host block leased from a [`tempra_pool::BufferPool`]; returns
///   to the pool when the last tensor viewing it drops.
/// - `Owned`: a host block that lives as long as its tensors and never enters the pool
///   (session-lifetime buffers: KV caches, converted weights).
/// - `Mapped`: bytes borrowed from a file mapping or another long-lived owner, zero-copy.
/// - `Static`: bytes embedded in the binary.
/// - `Device`: memory owned by a device backend.
/// - `Prepared`: a weight in a layout only one backend's kernels read (see
///   [`PreparedStorage`]); its dtype's own bytes are read back through
///   [`Storage::read_bytes`].
pub enum Storage {
    /// A pooled host lease.
    Pooled(HostLease),
    /// An owned, 64-byte aligned host block (not pooled).
    Owned(HostBlock),
    /// Borrowed bytes (a file mapping).
    Mapped(MappedBytes),
    /// Static bytes.
    Static(&'static [u8]),
    /// Device memory.
    Device(Box<dyn DeviceStorage>),
    /// A backend's prepared weight.
    Prepared(Box<dyn PreparedStorage>),
}

impl Storage {
    /// An owned, zeroed, 64-byte aligned host buffer of `bytes` bytes (not pooled).
    pub fn owned_zeroed(bytes: usize) -> Result<Storage> {
        let block = HostMemory
            .allocate(bytes.max(1))
            .map_err(|source| TensorError::Pool {
                op: "owned_zeroed",
                source,
            })?;
        Ok(Storage::Owned(block))
    }

    /// Static bytes, zero-copy when 64-byte aligned, else copied once into an owned
    /// aligned buffer (block structs and SIMD loads need alignment).
    pub fn from_static(bytes: &'static [u8]) -> Result<Storage> {
        if (bytes.as_ptr() as usize).is_multiple_of(tempra_pool::HOST_ALIGN) {
            return Ok(Storage::Static(bytes));
        }
        let mut owned = Self::owned_zeroed(bytes.len())?;
        if let Storage::Owned(block) = &mut owned {
            block.as_bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        }
        Ok(owned)
    }

    /// Usable bytes.
    pub fn byte_len(&self) -> usize {
        match self {
            Storage::Pooled(lease) => lease.len(),
            Storage::Owned(block) => block.size(),
            Storage::Mapped(mapped) => mapped.len,
            Storage::Static(bytes) => bytes.len(),
            Storage::Device(device) => device.byte_len(),
            Storage::Prepared(prepared) => prepared.byte_len(),
        }
    }

    /// Where the storage lives: `"host"` or the device backend's name.
    pub fn location(&self) -> &'static str {
        match self {
            Storage::Device(device) => device.backend_name(),
            _ => "host",
        }
    }

    /// Whether the bytes are host-addressable in the tensor's dtype layout (not device
    /// memory, not a prepared layout).
    pub fn is_host(&self) -> bool {
        !matches!(self, Storage::Device(_) | Storage::Prepared(_))
    }

    /// The prepared weight behind this storage, if it is one.
    pub fn prepared(&self) -> Option<&dyn PreparedStorage> {
        match self {
            Storage::Prepared(prepared) => Some(&**prepared),
            _ => None,
        }
    }

    /// The host bytes, or an error for device storage.
    pub fn host_bytes(&self) -> Result<&[u8]> {
        match self {
            Storage::Pooled(lease) => Ok(lease.as_bytes()),
            Storage::Owned(block) => Ok(block.as_bytes()),
            Storage::Mapped(mapped) => Ok(mapped.as_bytes()),
            Storage::Static(bytes) => Ok(bytes),
            Storage::Device(device) => Err(TensorError::Device {
                op: "host_bytes",
                found: device.backend_name(),
                expected: "host",
            }),
            Storage::Prepared(prepared) => Err(prepared_error("host_bytes", &**prepared)),
        }
    }

    /// The host bytes, writable: only pooled and owned host memory is writable.
    pub fn host_bytes_mut(&mut self) -> Result<&mut [u8]> {
        match self {
            Storage::Pooled(lease) => Ok(lease.as_bytes_mut()),
            Storage::Owned(block) => Ok(block.as_bytes_mut()),
            Storage::Mapped(_) | Storage::Static(_) => Err(TensorError::Argument {
                op: "host_bytes_mut",
                name: "storage",
                reason: "mapped and static storage is read-only".into(),
            }),
            Storage::Device(device) => Err(TensorError::Device {
                op: "host_bytes_mut",
                found: device.backend_name(),
                expected: "host",
            }),
            Storage::Prepared(prepared) => Err(prepared_error("host_bytes_mut", &**prepared)),
        }
    }

    /// Copies `dst.len()` bytes starting at byte `offset` into `dst`, from any storage:
    /// the bytes of the tensor's dtype layout (a prepared weight's converted back).
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        match self {
            Storage::Device(device) => return device.read_bytes(offset, dst),
            Storage::Prepared(prepared) => return prepared.read_bytes(offset, dst),
            _ => {}
        }
        let src = self.host_bytes()?;
        let end = offset
            .checked_add(dst.len())
            .filter(|&e| e <= src.len())
            .ok_or_else(|| TensorError::Argument {
                op: "read_bytes",
                name: "range",
                reason: format!("{offset}+{} exceeds {} bytes", dst.len(), src.len()),
            })?;
        dst.copy_from_slice(&src[offset..end]);
        Ok(())
    }

    /// The storage kind's name, for messages and Debug output.
    pub fn kind(&self) -> &'static str {
        match self {
            Storage::Pooled(_) => "pooled",
            Storage::Owned(_) => "owned",
            Storage::Mapped(_) => "mapped",
            Storage::Static(_) => "static",
            Storage::Device(_) => "device",
            Storage::Prepared(_) => "prepared",
        }
    }
}

/// The error for reading a prepared weight's bytes as its dtype's.
fn prepared_error(op: &'static str, prepared: &dyn PreparedStorage) -> TensorError {
    TensorError::Prepared {
        op,
        backend: prepared.backend_name(),
        layout: prepared.layout_name(),
    }
}

/// Views host bytes as a slice of `T`, or an error when misaligned or of a length that is
/// not a whole number of `T`s.
pub fn cast_host<'a, T: bytemuck::Pod>(op: &'static str, bytes: &'a [u8]) -> Result<&'a [T]> {
    let whole = bytes.len() - bytes.len() % size_of::<T>();
    bytemuck::try_cast_slice(&bytes[..whole]).map_err(|e| TensorError::Argument {
        op,
        name: "storage",
        reason: format!(
            "cannot view host bytes as {}: {e}",
            std::any::type_name::<T>()
        ),
    })
}

/// Views host bytes as a writable slice of `T`. See [`cast_host`].
pub fn cast_host_mut<'a, T: bytemuck::Pod>(
    op: &'static str,
    bytes: &'a mut [u8],
) -> Result<&'a mut [T]> {
    let whole = bytes.len() - bytes.len() % size_of::<T>();
    bytemuck::try_cast_slice_mut(&mut bytes[..whole]).map_err(|e| TensorError::Argument {
        op,
        name: "storage",
        reason: format!(
            "cannot view host bytes as {}: {e}",
            std::any::type_name::<T>()
        ),
    })
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Storage::Device(device) => write!(f, "Device({device:?})"),
            Storage::Prepared(prepared) => write!(f, "Prepared({prepared:?})"),
            other => write!(f, "{}({} bytes)", other.kind(), other.byte_len()),
        }
    }
}
