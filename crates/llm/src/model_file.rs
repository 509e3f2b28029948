//! `ModelFile`: a model on disk, memory-mapped: its metadata and zero-copy tensors.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use tempra_tensor::{Layout, MappedBytes, Storage, Tensor};

use crate::error::{LlmError, Result};
use crate::gguf::keys::GENERAL_ARCHITECTURE;
use crate::gguf::{GgufWriter, Limits, MAGIC, Metadata, TensorInfo, reader};

/// The bytes behind a model file: a memory mapping, or any other long-lived buffer.
pub type ModelBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Which format a [`ModelFile`] was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelFormat {
    /// GGUF.
    Gguf {
        /// The GGUF version (2 or 3).
        version: u32,
        /// The tensor data alignment.
        alignment: u64,
        /// Where the tensor data section starts.
        data_offset: u64,
    },
    /// A llama2.c checkpoint plus its tokenizer file, presented with the metadata a GGUF
    /// conversion would carry (see [`crate::llama2c`]).
    Llama2c,
}

/// A model file, memory-mapped: metadata plus tensor infos, with every tensor available
/// as a zero-copy [`Tensor`] viewing the mapping (quantized blocks straight from the
/// file).
///
/// A GGUF file is fully validated when opened (see [`crate::gguf`]): every tensor lies
/// inside the file, aligned, with a known dtype and a shape that fits its blocks, so
/// [`ModelFile::tensor`] cannot fail for a listed tensor.
///
/// ```no_run
/// use tempra_llm::ModelFile;
///
/// let model = ModelFile::open("model.gguf")?;
/// println!("{}", model.architecture()?);
/// let wq = model.tensor("blk.0.attn_q.weight")?; // zero-copy
/// println!("{:?} {}", wq.dims(), wq.dtype());
/// # Ok::<(), tempra_llm::LlmError>(())
/// ```
pub struct ModelFile {
    bytes: ModelBytes,
    format: ModelFormat,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    /// Set for a model embedded in the binary: tensors are `Storage::Static` views.
    static_bytes: Option<&'static [u8]>,
    /// The file mapping behind `bytes`, for a GGUF opened from disk (page advice).
    mapping: Option<Arc<memmap2::Mmap>>,
}

impl std::fmt::Debug for ModelFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFile")
            .field("format", &self.format)
            .field("bytes", &self.file_size())
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// Memory-maps `path` read-only (an empty file gives an empty buffer).
pub(crate) fn map_file(path: &Path) -> Result<ModelBytes> {
    Ok(match mmap_file(path)? {
        Some(map) => map,
        None => Arc::new(Vec::<u8>::new()),
    })
}

/// Memory-maps `path` read-only; `None` for an empty file (which cannot be mapped).
fn mmap_file(path: &Path) -> Result<Option<Arc<memmap2::Mmap>>> {
    let io = |source| LlmError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    if meta.len() == 0 {
        return Ok(None);
    }
    // SAFETY: the mapping is read-only and private to this process, and tempra never
    // writes through it; every access goes through bounds-checked slices of it. What no
    // Rust code can rule out is another process truncating or rewriting the file while it
    // is mapped (reads may then fault or see changed bytes); model files are treated as
    // immutable while open, the same contract llama.cpp's mmap loader has.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(Some(Arc::new(map)))
}

impl ModelFile {
    /// Opens and validates a GGUF file, memory-mapping it, with the default [`Limits`].
    pub fn open(path: impl AsRef<Path>) -> Result<ModelFile> {
        Self::open_with_limits(path, &Limits::default())
    }

    /// Opens and validates a GGUF file with explicit limits.
    pub fn open_with_limits(path: impl AsRef<Path>, limits: &Limits) -> Result<ModelFile> {
        let mapping = mmap_file(path.as_ref())?;
        let bytes: ModelBytes = match &mapping {
            Some(map) => map.clone(),
            None => Arc::new(Vec::<u8>::new()),
        };
        let mut file = Self::from_gguf_bytes(bytes, limits)?;
        file.mapping = mapping;
        Ok(file)
    }

    /// Tells the OS that this process no longer needs the file pages under `bytes` (a
    /// tensor's bytes, e.g. of a weight the backend copied into another layout), so they
    /// stop counting in its resident memory. Whole pages inside `bytes` only; nothing
    /// for bytes outside a file mapping (embedded or in-memory models). Reading the
    /// bytes later is still correct: the mapping is read-only, so the OS reads the
    /// pages back from the file.
    pub fn release_pages(&self, bytes: &[u8]) {
        #[cfg(unix)]
        if let Some(map) = &self.mapping {
            // Inward to 64 KiB, a multiple of every common page size.
            const GRAIN: usize = 64 * 1024;
            let base = map.as_ptr() as usize;
            let (start, end) = (
                bytes.as_ptr() as usize,
                bytes.as_ptr() as usize + bytes.len(),
            );
            if start < base || end > base + map.len() {
                return;
            }
            let first = (start - base).next_multiple_of(GRAIN);
            let last = (end - base) / GRAIN * GRAIN;
            if last > first {
                // SAFETY: MADV_DONTNEED on a private, read-only file mapping that no one
                // writes only drops clean page-cache pages from this process; the next
                // read faults them back in from the file with the same contents, so
                // every outstanding `&[u8]` into the mapping stays valid and unchanged.
                // The range lies inside the mapping (checked above).
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        first,
                        last - first,
                    )
                };
            }
        }
        #[cfg(not(unix))]
        let _ = bytes;
    }

    /// Parses and validates GGUF bytes already in memory (or mapped by the caller).
    pub fn from_gguf_bytes(bytes: ModelBytes, limits: &Limits) -> Result<ModelFile> {
        let parsed = reader::parse((*bytes).as_ref(), limits)?;
        let format = ModelFormat::Gguf {
            version: parsed.version,
            alignment: parsed.alignment,
            data_offset: parsed.data_offset,
        };
        Ok(Self::from_parts(
            bytes,
            format,
            parsed.metadata,
            parsed.tensors,
        ))
    }

    /// Parses and validates GGUF bytes embedded in the binary (`include_bytes!`). Its
    /// tensors are [`Storage::Static`] views, zero-copy where a tensor's bytes are
    /// 64-byte aligned (a GGUF with `general.alignment = 64` embedded at a 64-byte
    /// aligned address), and copied once into an aligned owned buffer otherwise: embedded
    /// bytes carry no alignment guarantee, and block structs and SIMD loads need one.
    pub fn from_static_gguf(bytes: &'static [u8], limits: &Limits) -> Result<ModelFile> {
        let mut file = Self::from_gguf_bytes(Arc::new(bytes), limits)?;
        file.static_bytes = Some(bytes);
        Ok(file)
    }

    /// Opens a llama2.c checkpoint with its tokenizer file (see [`crate::llama2c`]).
    pub fn open_llama2c(
        checkpoint: impl AsRef<Path>,
        tokenizer: impl AsRef<Path>,
    ) -> Result<ModelFile> {
        crate::llama2c::open(checkpoint.as_ref(), tokenizer.as_ref())
    }

    /// Opens `path` as GGUF, or, when `tokenizer` is given, as a llama2.c checkpoint with
    /// that tokenizer file: what the CLI's `-m MODEL [--tokenizer FILE]` means.
    pub fn load(path: impl AsRef<Path>, tokenizer: Option<&Path>) -> Result<ModelFile> {
        let path = path.as_ref();
        match tokenizer {
            None => Self::open(path),
            Some(tok) => {
                let mut magic = [0u8; 4];
                let io = |source| LlmError::Io {
                    path: path.display().to_string(),
                    source,
                };
                let n = File::open(path).map_err(io)?.read(&mut magic).map_err(io)?;
                if n == 4 && &magic == MAGIC {
                    return Err(LlmError::Argument {
                        what: format!(
                            "{} is a GGUF file, which carries its own tokenizer; --tokenizer is only for llama2.c checkpoints",
                            path.display()
                        ),
                    });
                }
                Self::open_llama2c(path, tok)
            }
        }
    }

    /// A model file from parsed parts; `tensors` must lie inside `bytes` (checked).
    pub(crate) fn from_parts(
        bytes: ModelBytes,
        format: ModelFormat,
        metadata: Metadata,
        tensors: Vec<TensorInfo>,
    ) -> ModelFile {
        let len = (*bytes).as_ref().len() as u64;
        debug_assert!(
            tensors
                .iter()
                .all(|t| t.offset.checked_add(t.byte_len).is_some_and(|e| e <= len))
        );
        let index = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_string(), i))
            .collect();
        ModelFile {
            bytes,
            format,
            metadata,
            tensors,
            index,
            static_bytes: None,
            mapping: None,
        }
    }

    /// The format the file was read from.
    pub fn format(&self) -> ModelFormat {
        self.format
    }

    /// The metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.metadata.get_str(GENERAL_ARCHITECTURE)
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> u64 {
        (*self.bytes).as_ref().len() as u64
    }

    /// Every tensor, in file order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`, if present.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// Whether the file holds a tensor named `name`.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The raw bytes of a tensor of this file.
    ///
    /// Errors: an `info` that does not lie inside this file (one from another file) is a
    /// [`LlmError::TensorData`].
    pub fn tensor_bytes(&self, info: &TensorInfo) -> Result<&[u8]> {
        let bytes = (*self.bytes).as_ref();
        usize::try_from(info.offset)
            .ok()
            .zip(usize::try_from(info.byte_len).ok())
            .and_then(|(start, len)| bytes.get(start..start.checked_add(len)?))
            .ok_or_else(|| LlmError::TensorData {
                name: info.name().to_string(),
                what: format!(
                    "bytes {}+{} are outside the file",
                    info.offset, info.byte_len
                ),
            })
    }

    /// The tensor named `name` as a zero-copy, contiguous, row-major [`Tensor`] viewing
    /// the file's bytes.
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let info = self
            .tensor_info(name)
            .ok_or_else(|| LlmError::MissingTensor {
                name: name.to_string(),
            })?;
        self.view(info)
    }

    /// A zero-copy [`Tensor`] of a tensor of this file.
    pub fn view(&self, info: &TensorInfo) -> Result<Tensor> {
        let start = usize::try_from(info.offset).unwrap_or(usize::MAX);
        let len = usize::try_from(info.byte_len).unwrap_or(usize::MAX);
        let layout = Layout::contiguous(*info.shape(), info.dtype())?;
        if let Some(all) = self.static_bytes {
            let bytes = start
                .checked_add(len)
                .and_then(|end| all.get(start..end))
                .ok_or_else(|| LlmError::TensorData {
                    name: info.name().to_string(),
                    what: format!("bytes {start}+{len} are outside the embedded model"),
                })?;
            return Ok(Tensor::from_storage(Storage::from_static(bytes)?, layout)?);
        }
        let mapped = MappedBytes::new(self.bytes.clone(), start, len)?;
        Ok(Tensor::from_storage(Storage::Mapped(mapped), layout)?)
    }

    /// Writes this model as a GGUF v3 file: the same metadata (alignment included) and
    /// tensors, in the same order, with the same bytes.
    pub fn write_gguf<W: Write>(&self, out: W) -> Result<W> {
        let specs = self.tensors.iter().map(|t| t.spec.clone()).collect();
        let mut writer = GgufWriter::new(out, &self.metadata, specs)?;
        for info in &self.tensors {
            writer.write_data(self.tensor_bytes(info)?)?;
        }
        writer.finish()
    }
}
