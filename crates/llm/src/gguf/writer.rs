//! `GgufWriter`: writes a GGUF v3 file (metadata, tensor infos, aligned tensor data),
//! streaming the tensor data so that no model ever needs to be whole in memory.

use std::collections::HashSet;
use std::io::Write;

use super::limits::MAX_TENSOR_DIMS;
use super::metadata::Metadata;
use super::tensor_info::TensorSpec;
use super::value::{Array, Value};
use super::{DEFAULT_ALIGNMENT, KEY_ALIGNMENT, MAGIC};
use crate::error::{LlmError, Result};

/// The version this writer produces.
pub const WRITE_VERSION: u32 = 3;

/// Writes a GGUF file: the header, metadata and tensor infos at construction, then each
/// tensor's bytes, in the order of the specs, through [`GgufWriter::write_data`] (in one
/// call or in chunks), then [`GgufWriter::finish`].
///
/// Tensor data is aligned to `general.alignment` (32 unless the metadata sets it), with
/// zero padding after every tensor.
///
/// ```
/// use tempra_llm::gguf::{GgufWriter, Metadata, TensorSpec};
/// use tempra_tensor::{DType, Shape};
///
/// let mut md = Metadata::new();
/// md.set("general.architecture", "llama");
/// let specs = vec![TensorSpec::new("w", Shape::new(&[2, 3])?, DType::F32)];
/// let mut w = GgufWriter::new(Vec::new(), &md, specs)?;
/// w.write_data(bytemuck::cast_slice(&[1f32, 2., 3., 4., 5., 6.]))?;
/// let bytes: Vec<u8> = w.finish()?;
/// assert_eq!(&bytes[..4], b"GGUF");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct GgufWriter<W: Write> {
    out: W,
    specs: Vec<TensorSpec>,
    sizes: Vec<u64>,
    alignment: u64,
    /// Bytes written so far.
    pos: u64,
    /// The tensor whose data is being written.
    current: usize,
    /// Bytes of the current tensor written so far.
    written: u64,
}

fn io_err(source: std::io::Error) -> LlmError {
    LlmError::Io {
        path: "GGUF output".into(),
        source,
    }
}

fn arg(what: impl Into<String>) -> LlmError {
    LlmError::Argument { what: what.into() }
}

impl<W: Write> GgufWriter<W> {
    /// Writes the header, `metadata` and the infos of `tensors` to `out`.
    ///
    /// Errors: a duplicate or empty tensor name, a rank outside 1..=4, a shape that does
    /// not fit its dtype's blocks, a dtype GGUF has no id for, or a bad
    /// `general.alignment` is an [`LlmError::Argument`]; write failures are
    /// [`LlmError::Io`].
    pub fn new(out: W, metadata: &Metadata, tensors: Vec<TensorSpec>) -> Result<Self> {
        let alignment = match metadata.get(KEY_ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_integer().and_then(|a| u64::try_from(a).ok()) {
                Some(a) if a.is_power_of_two() => a,
                _ => {
                    return Err(arg(format!(
                        "{KEY_ALIGNMENT} is {}, not a power of two",
                        v.describe()
                    )));
                }
            },
        };
        let mut sizes = Vec::with_capacity(tensors.len());
        let mut names = HashSet::new();
        for spec in &tensors {
            let name = &spec.name;
            if name.is_empty() || !names.insert(name.as_str()) {
                return Err(arg(format!("tensor name `{name}` is empty or repeated")));
            }
            let rank = spec.shape.rank();
            if rank == 0 || rank > MAX_TENSOR_DIMS {
                return Err(arg(format!(
                    "tensor `{name}` has rank {rank}; GGUF allows 1 to {MAX_TENSOR_DIMS}"
                )));
            }
            if spec.dtype.gguf_type_id().is_none() {
                return Err(arg(format!(
                    "tensor `{name}`: GGUF has no type id for {}",
                    spec.dtype
                )));
            }
            let size = spec.byte_len().ok_or_else(|| {
                arg(format!(
                    "tensor `{name}`: shape {} does not fit {} blocks",
                    spec.shape, spec.dtype
                ))
            })?;
            sizes.push(size as u64);
        }
        let mut w = Self {
            out,
            specs: tensors,
            sizes,
            alignment,
            pos: 0,
            current: 0,
            written: 0,
        };
        w.header(metadata)?;
        w.skip_empty_tensors()?;
        Ok(w)
    }

    fn header(&mut self, metadata: &Metadata) -> Result<()> {
        self.put(MAGIC)?;
        self.put(&WRITE_VERSION.to_le_bytes())?;
        self.put(&(self.specs.len() as u64).to_le_bytes())?;
        self.put(&(metadata.len() as u64).to_le_bytes())?;
        for (key, value) in metadata.iter() {
            self.string(key.as_bytes())?;
            self.put(&value.value_type().id().to_le_bytes())?;
            self.value(value)?;
        }
        let mut offset = 0u64;
        for i in 0..self.specs.len() {
            let spec = &self.specs[i];
            let dims = spec.gguf_dims();
            let type_id = spec.dtype.gguf_type_id().unwrap_or_default();
            let name = spec.name.clone();
            self.string(name.as_bytes())?;
            self.put(&(dims.len() as u32).to_le_bytes())?;
            for d in dims {
                self.put(&d.to_le_bytes())?;
            }
            self.put(&type_id.to_le_bytes())?;
            self.put(&offset.to_le_bytes())?;
            offset = offset
                .checked_add(self.sizes[i])
                .and_then(|o| o.checked_next_multiple_of(self.alignment))
                .ok_or_else(|| arg("the tensor data size overflows"))?;
        }
        self.pad()
    }

    fn value(&mut self, value: &Value) -> Result<()> {
        match value {
            Value::U8(v) => self.put(&[*v]),
            Value::I8(v) => self.put(&v.to_le_bytes()),
            Value::U16(v) => self.put(&v.to_le_bytes()),
            Value::I16(v) => self.put(&v.to_le_bytes()),
            Value::U32(v) => self.put(&v.to_le_bytes()),
            Value::I32(v) => self.put(&v.to_le_bytes()),
            Value::F32(v) => self.put(&v.to_le_bytes()),
            Value::Bool(v) => self.put(&[*v as u8]),
            Value::String(s) => self.string(s),
            Value::Array(a) => self.array(a),
            Value::U64(v) => self.put(&v.to_le_bytes()),
            Value::I64(v) => self.put(&v.to_le_bytes()),
            Value::F64(v) => self.put(&v.to_le_bytes()),
        }
    }

    fn array(&mut self, array: &Array) -> Result<()> {
        self.put(&array.element_type().id().to_le_bytes())?;
        self.put(&(array.len() as u64).to_le_bytes())?;
        match array {
            Array::U8(v) => self.put(v),
            Array::I8(v) => self.put(bytemuck::cast_slice(v)),
            Array::U16(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::I16(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::U32(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::I32(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::F32(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::Bool(v) => v.iter().try_for_each(|&x| self.put(&[x as u8])),
            Array::String(v) => v.iter().try_for_each(|s| self.string(s)),
            Array::Array(v) => v.iter().try_for_each(|a| self.array(a)),
            Array::U64(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::I64(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
            Array::F64(v) => v.iter().try_for_each(|x| self.put(&x.to_le_bytes())),
        }
    }

    fn string(&mut self, s: &[u8]) -> Result<()> {
        self.put(&(s.len() as u64).to_le_bytes())?;
        self.put(s)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(io_err)?;
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Zero bytes up to the next multiple of the alignment.
    fn pad(&mut self) -> Result<()> {
        const ZEROS: [u8; 64] = [0; 64];
        let mut left = self.pos.next_multiple_of(self.alignment) - self.pos;
        while left > 0 {
            let n = left.min(ZEROS.len() as u64);
            self.put(&ZEROS[..n as usize])?;
            left -= n;
        }
        Ok(())
    }

    /// Moves past tensors with no data (a zero dim).
    fn skip_empty_tensors(&mut self) -> Result<()> {
        while self.current < self.specs.len() && self.written == self.sizes[self.current] {
            self.pad()?;
            self.current += 1;
            self.written = 0;
        }
        Ok(())
    }

    /// The spec of the tensor the next [`GgufWriter::write_data`] bytes belong to, or
    /// `None` when every tensor is complete.
    pub fn current_tensor(&self) -> Option<&TensorSpec> {
        self.specs.get(self.current)
    }

    /// Appends `bytes` to the current tensor's data. A tensor may be written in any number
    /// of chunks; once its size is reached the writer pads and moves to the next one.
    ///
    /// Errors: more bytes than the current tensor has left (a chunk never spans two
    /// tensors), or data after the last tensor, is an [`LlmError::Argument`].
    pub fn write_data(&mut self, bytes: &[u8]) -> Result<()> {
        let Some(spec) = self.specs.get(self.current) else {
            return Err(arg("tensor data written after the last tensor"));
        };
        let left = self.sizes[self.current] - self.written;
        if bytes.len() as u64 > left {
            return Err(arg(format!(
                "{} bytes written to tensor `{}`, which has only {left} bytes left",
                bytes.len(),
                spec.name
            )));
        }
        self.put(bytes)?;
        self.written += bytes.len() as u64;
        self.skip_empty_tensors()
    }

    /// Checks every tensor was written in full, flushes, and returns the output.
    pub fn finish(mut self) -> Result<W> {
        if let Some(spec) = self.specs.get(self.current) {
            return Err(arg(format!(
                "tensor `{}` is incomplete: {} of {} bytes written",
                spec.name, self.written, self.sizes[self.current]
            )));
        }
        self.out.flush().map_err(io_err)?;
        Ok(self.out)
    }
}
