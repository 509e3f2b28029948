//! The GGUF v2/v3 parser: header, metadata and tensor infos, validated against
//! [`Limits`] and the file's length before anything is trusted or allocated.

use std::collections::HashSet;

use tempra_tensor::{DType, Layout, Shape};

use super::cursor::{Cursor, Truncated};
use super::limits::{Limits, MAX_TENSOR_DIMS};
use super::metadata::Metadata;
use super::tensor_info::{TensorInfo, TensorSpec};
use super::value::{Array, Value, ValueType};
use super::{DEFAULT_ALIGNMENT, KEY_ALIGNMENT, MAGIC};
use crate::error::{LlmError, Result};

/// Bytes of the smallest tensor info: name length, `n_dims`, one dim, type, offset.
const MIN_TENSOR_INFO_LEN: usize = 8 + 4 + 8 + 4 + 8;

/// Everything a GGUF file says about itself; tensor offsets are absolute.
#[derive(Debug)]
pub(crate) struct ParsedGguf {
    pub(crate) version: u32,
    pub(crate) metadata: Metadata,
    pub(crate) tensors: Vec<TensorInfo>,
    pub(crate) alignment: u64,
    pub(crate) data_offset: u64,
}

fn gguf_err(offset: usize, context: &str, what: impl Into<String>) -> LlmError {
    LlmError::Gguf {
        offset: offset as u64,
        key_or_tensor: context.to_string(),
        what: what.into(),
    }
}

fn truncated(context: &str) -> impl Fn(Truncated) -> LlmError + '_ {
    move |t| gguf_err(t.offset, context, t.message())
}

/// Shows the first bytes of a file that is not GGUF, escaped.
fn show_magic(bytes: &[u8]) -> String {
    bytes
        .iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect()
}

struct Reader<'a> {
    cur: Cursor<'a>,
    limits: &'a Limits,
}

/// Parses the GGUF header, metadata and tensor infos of `bytes` (a whole file) and
/// checks every tensor's data lies inside `bytes`, aligned.
pub(crate) fn parse(bytes: &[u8], limits: &Limits) -> Result<ParsedGguf> {
    let mut r = Reader {
        cur: Cursor::new(bytes),
        limits,
    };
    let version = r.header()?;
    let header = "header";
    let count_at = r.cur.pos();
    let tensor_count = r.cur.u64().map_err(truncated(header))?;
    if tensor_count > limits.max_tensor_count {
        let max = limits.max_tensor_count;
        return Err(gguf_err(
            count_at,
            header,
            format!("tensor count {tensor_count} exceeds the limit of {max}"),
        ));
    }
    let kv_at = r.cur.pos();
    let kv_count = r.cur.u64().map_err(truncated(header))?;
    if kv_count > limits.max_kv_count {
        let max = limits.max_kv_count;
        return Err(gguf_err(
            kv_at,
            header,
            format!("metadata key count {kv_count} exceeds the limit of {max}"),
        ));
    }

    let (metadata, alignment) = r.metadata(kv_count)?;
    let (mut tensors, offset_fields) = r.tensor_infos(tensor_count, alignment)?;

    let infos_end = r.cur.pos() as u64;
    let data_offset = infos_end
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| gguf_err(r.cur.pos(), header, "data section offset overflows"))?;
    let file_len = bytes.len() as u64;
    for (info, &field_at) in tensors.iter_mut().zip(&offset_fields) {
        let start = data_offset.checked_add(info.offset);
        let end = start.and_then(|s| s.checked_add(info.byte_len));
        match (start, end) {
            (Some(start), Some(end)) if end <= file_len => info.offset = start,
            _ => {
                return Err(gguf_err(
                    field_at,
                    &format!("tensor `{}`", info.name()),
                    format!(
                        "data at offset {} + {} bytes (data section at {data_offset}) runs past the end of the {file_len}-byte file",
                        info.offset, info.byte_len
                    ),
                ));
            }
        }
    }
    Ok(ParsedGguf {
        version,
        metadata,
        tensors,
        alignment,
        data_offset,
    })
}

impl Reader<'_> {
    /// Magic and version.
    fn header(&mut self) -> Result<u32> {
        const CTX: &str = "header";
        let len = self.cur.remaining();
        let magic = self.cur.take(4).map_err(|_| {
            gguf_err(
                0,
                CTX,
                format!("not a GGUF file: it is only {len} bytes long"),
            )
        })?;
        if magic != MAGIC {
            return Err(gguf_err(
                0,
                CTX,
                format!(
                    "not a GGUF file: it starts with \"{}\", not \"GGUF\"",
                    show_magic(magic)
                ),
            ));
        }
        let version = self.cur.u32().map_err(truncated(CTX))?;
        match version {
            2 | 3 => Ok(version),
            1 => Err(gguf_err(4, CTX, "GGUF v1 is not supported (v2 and v3 are)")),
            v if matches!(v.swap_bytes(), 1..=3) => {
                Err(gguf_err(4, CTX, "big-endian GGUF files are not supported"))
            }
            v => Err(gguf_err(
                4,
                CTX,
                format!("unknown GGUF version {v} (v2 and v3 are supported)"),
            )),
        }
    }

    /// `count` key/value pairs; returns them and the validated `general.alignment`.
    fn metadata(&mut self, count: u64) -> Result<(Metadata, u64)> {
        let mut metadata = Metadata::new();
        let mut alignment = DEFAULT_ALIGNMENT;
        // `count` was capped by the limits; no allocation is sized by it.
        for i in 0..count {
            let key_at = self.cur.pos();
            let key_ctx = format!("metadata key #{i}");
            let key = self.string(self.limits.max_key_len, &key_ctx)?;
            let key = String::from_utf8(key)
                .map_err(|_| gguf_err(key_at, &key_ctx, "the key is not valid UTF-8"))?;
            let ctx = format!("metadata key `{key}`");
            let type_at = self.cur.pos();
            let type_id = self.cur.u32().map_err(truncated(&ctx))?;
            let value_type = ValueType::from_id(type_id)
                .ok_or_else(|| gguf_err(type_at, &ctx, format!("unknown value type {type_id}")))?;
            let value_at = self.cur.pos();
            let value = self.value(value_type, &ctx)?;
            if key == KEY_ALIGNMENT {
                alignment = self.alignment(&value, value_at, &ctx)?;
            }
            if !metadata.insert_new(key, value) {
                return Err(gguf_err(key_at, &ctx, "duplicate key"));
            }
        }
        Ok((metadata, alignment))
    }

    fn alignment(&self, value: &Value, at: usize, ctx: &str) -> Result<u64> {
        let Some(a) = value.as_integer() else {
            return Err(gguf_err(
                at,
                ctx,
                format!("expected an unsigned integer, found {}", value.describe()),
            ));
        };
        let max = self.limits.max_alignment;
        match u64::try_from(a) {
            Ok(a) if a.is_power_of_two() && a <= max => Ok(a),
            _ => Err(gguf_err(
                at,
                ctx,
                format!("alignment {a} is not a power of two between 1 and {max}"),
            )),
        }
    }

    /// A length-prefixed string of at most `max` bytes.
    fn string(&mut self, max: u64, ctx: &str) -> Result<Vec<u8>> {
        let at = self.cur.pos();
        let len = self.cur.u64().map_err(truncated(ctx))?;
        if len > max {
            return Err(gguf_err(
                at,
                ctx,
                format!("string length {len} exceeds the limit of {max}"),
            ));
        }
        let bytes = self
            .cur
            .take(len)
            .map_err(|t| gguf_err(at, ctx, format!("a string of {len} bytes {}", t.message())))?;
        Ok(bytes.to_vec())
    }

    fn value(&mut self, value_type: ValueType, ctx: &str) -> Result<Value> {
        let at = self.cur.pos();
        let t = truncated(ctx);
        Ok(match value_type {
            ValueType::U8 => Value::U8(self.cur.u8().map_err(t)?),
            ValueType::I8 => Value::I8(self.cur.u8().map_err(t)? as i8),
            ValueType::U16 => Value::U16(self.cur.u16().map_err(t)?),
            ValueType::I16 => Value::I16(self.cur.u16().map_err(t)? as i16),
            ValueType::U32 => Value::U32(self.cur.u32().map_err(t)?),
            ValueType::I32 => Value::I32(self.cur.u32().map_err(t)? as i32),
            ValueType::U64 => Value::U64(self.cur.u64().map_err(t)?),
            ValueType::I64 => Value::I64(self.cur.u64().map_err(t)? as i64),
            ValueType::F32 => Value::F32(self.cur.f32().map_err(t)?),
            ValueType::F64 => Value::F64(self.cur.f64().map_err(t)?),
            ValueType::Bool => Value::Bool(bool_byte(self.cur.u8().map_err(t)?, at, ctx)?),
            ValueType::String => Value::String(self.string(self.limits.max_string_len, ctx)?),
            ValueType::Array => Value::Array(self.array(ctx, 1)?),
        })
    }

    /// An array (element type, count, elements) at nesting `depth` (1 = outermost).
    fn array(&mut self, ctx: &str, depth: u32) -> Result<Array> {
        let at = self.cur.pos();
        if depth > self.limits.max_array_depth {
            let max = self.limits.max_array_depth;
            return Err(gguf_err(
                at,
                ctx,
                format!("arrays nested deeper than the limit of {max}"),
            ));
        }
        let type_id = self.cur.u32().map_err(truncated(ctx))?;
        let elem = ValueType::from_id(type_id)
            .ok_or_else(|| gguf_err(at, ctx, format!("unknown array element type {type_id}")))?;
        let count_at = self.cur.pos();
        let count = self.cur.u64().map_err(truncated(ctx))?;
        if count > self.limits.max_array_len {
            let max = self.limits.max_array_len;
            return Err(gguf_err(
                count_at,
                ctx,
                format!("array length {count} exceeds the limit of {max}"),
            ));
        }
        // Every element takes at least `min_encoded_len` bytes: a count the file cannot
        // hold is rejected before any allocation is sized by it.
        let least = count.checked_mul(elem.min_encoded_len() as u64);
        let left = self.cur.remaining();
        if least.is_none_or(|least| least > left as u64) {
            return Err(gguf_err(
                count_at,
                ctx,
                format!(
                    "an array of {count} {elem} cannot fit in the {left} bytes left (truncated file?)"
                ),
            ));
        }
        let n = count as usize;
        let t = truncated(ctx);
        Ok(match elem {
            ValueType::U8 => Array::U8(self.cur.take(count).map_err(t)?.to_vec()),
            ValueType::I8 => Array::I8(
                self.cur
                    .take(count)
                    .map_err(t)?
                    .iter()
                    .map(|&b| b as i8)
                    .collect(),
            ),
            ValueType::U16 => {
                Array::U16(self.scalars(n, 2, ctx, |b| u16::from_le_bytes([b[0], b[1]]))?)
            }
            ValueType::I16 => {
                Array::I16(self.scalars(n, 2, ctx, |b| i16::from_le_bytes([b[0], b[1]]))?)
            }
            ValueType::U32 => Array::U32(self.scalars(n, 4, ctx, |b| u32::from_le_bytes(word(b)))?),
            ValueType::I32 => Array::I32(self.scalars(n, 4, ctx, |b| i32::from_le_bytes(word(b)))?),
            ValueType::F32 => Array::F32(self.scalars(n, 4, ctx, |b| f32::from_le_bytes(word(b)))?),
            ValueType::U64 => {
                Array::U64(self.scalars(n, 8, ctx, |b| u64::from_le_bytes(dword(b)))?)
            }
            ValueType::I64 => {
                Array::I64(self.scalars(n, 8, ctx, |b| i64::from_le_bytes(dword(b)))?)
            }
            ValueType::F64 => {
                Array::F64(self.scalars(n, 8, ctx, |b| f64::from_le_bytes(dword(b)))?)
            }
            ValueType::Bool => {
                let start = self.cur.pos();
                let bytes = self.cur.take(count).map_err(t)?;
                let mut out = Vec::with_capacity(n);
                for (i, &b) in bytes.iter().enumerate() {
                    out.push(bool_byte(b, start + i, ctx)?);
                }
                Array::Bool(out)
            }
            ValueType::String => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(self.string(self.limits.max_string_len, ctx)?);
                }
                Array::String(out)
            }
            ValueType::Array => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(self.array(ctx, depth + 1)?);
                }
                Array::Array(out)
            }
        })
    }

    /// `n` fixed-size little-endian scalars of `size` bytes each.
    fn scalars<T>(
        &mut self,
        n: usize,
        size: usize,
        ctx: &str,
        decode: impl Fn(&[u8]) -> T,
    ) -> Result<Vec<T>> {
        let bytes = self
            .cur
            .take((n as u64) * size as u64)
            .map_err(truncated(ctx))?;
        Ok(bytes.chunks_exact(size).map(decode).collect())
    }

    /// `count` tensor infos; returns them (offsets relative to the data section) and the
    /// file offset of each one's offset field, for later bounds errors.
    fn tensor_infos(
        &mut self,
        count: u64,
        alignment: u64,
    ) -> Result<(Vec<TensorInfo>, Vec<usize>)> {
        let cap = (count as usize).min(self.cur.remaining() / MIN_TENSOR_INFO_LEN);
        let mut infos = Vec::with_capacity(cap);
        let mut offset_fields = Vec::with_capacity(cap);
        let mut names = HashSet::with_capacity(cap);
        for i in 0..count {
            let name_at = self.cur.pos();
            let name_ctx = format!("tensor #{i}");
            let name = self.string(self.limits.max_tensor_name_len, &name_ctx)?;
            let name = String::from_utf8(name)
                .map_err(|_| gguf_err(name_at, &name_ctx, "the name is not valid UTF-8"))?;
            let ctx = format!("tensor `{name}`");
            let t = truncated(&ctx);

            let dims_at = self.cur.pos();
            let n_dims = self.cur.u32().map_err(&t)?;
            if n_dims == 0 || n_dims as usize > MAX_TENSOR_DIMS {
                return Err(gguf_err(
                    dims_at,
                    &ctx,
                    format!("{n_dims} dims (1 to {MAX_TENSOR_DIMS} are allowed)"),
                ));
            }
            let mut ne = [0usize; MAX_TENSOR_DIMS];
            for d in ne.iter_mut().take(n_dims as usize) {
                let at = self.cur.pos();
                let dim = self.cur.u64().map_err(&t)?;
                *d = usize::try_from(dim)
                    .ok()
                    .filter(|&d| d as u64 <= i64::MAX as u64)
                    .ok_or_else(|| gguf_err(at, &ctx, format!("dim {dim} is too large")))?;
            }
            let ne = &ne[..n_dims as usize];

            let type_at = self.cur.pos();
            let type_id = self.cur.u32().map_err(&t)?;
            let dtype = DType::from_gguf_type_id(type_id).ok_or_else(|| {
                gguf_err(
                    type_at,
                    &ctx,
                    format!("unknown or unsupported ggml type {type_id}"),
                )
            })?;

            let offset_at = self.cur.pos();
            let offset = self.cur.u64().map_err(&t)?;

            let spec =
                tensor_spec(name, ne, dtype).map_err(|what| gguf_err(dims_at, &ctx, what))?;
            let byte_len = spec.byte_len().ok_or_else(|| {
                gguf_err(
                    dims_at,
                    &ctx,
                    format!("the size of {} {dtype} values overflows", spec.shape),
                )
            })?;
            if !offset.is_multiple_of(alignment) {
                return Err(gguf_err(
                    offset_at,
                    &ctx,
                    format!("data offset {offset} is not a multiple of the alignment {alignment}"),
                ));
            }
            if !names.insert(spec.name.clone()) {
                return Err(gguf_err(name_at, &ctx, "duplicate tensor name"));
            }
            infos.push(TensorInfo {
                spec,
                offset,
                byte_len: byte_len as u64,
            });
            offset_fields.push(offset_at);
        }
        Ok((infos, offset_fields))
    }
}

/// The spec of a tensor with GGUF dims `ne` (innermost first), or why it is invalid.
fn tensor_spec(
    name: String,
    ne: &[usize],
    dtype: DType,
) -> std::result::Result<TensorSpec, String> {
    let block = dtype.block_len();
    if !ne[0].is_multiple_of(block) {
        return Err(format!(
            "row length {} is not a multiple of the {dtype} block size {block}",
            ne[0]
        ));
    }
    let dims: Vec<usize> = ne.iter().rev().copied().collect();
    let shape = Shape::new(&dims).map_err(|e| e.to_string())?;
    if shape.checked_elem_count().is_none() {
        return Err(format!("the element count of {shape} overflows"));
    }
    // The layout a zero-copy tensor will get: validated here so that every tensor of a
    // parsed file can be viewed.
    Layout::contiguous(shape, dtype).map_err(|e| e.to_string())?;
    Ok(TensorSpec { name, shape, dtype })
}

fn bool_byte(b: u8, at: usize, ctx: &str) -> Result<bool> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(gguf_err(
            at,
            ctx,
            format!("bool byte {b} is neither 0 nor 1"),
        )),
    }
}

fn word(b: &[u8]) -> [u8; 4] {
    [b[0], b[1], b[2], b[3]]
}

fn dword(b: &[u8]) -> [u8; 8] {
    [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]
}
