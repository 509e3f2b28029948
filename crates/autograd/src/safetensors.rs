//! The safetensors file format (written here; it is small): an 8-byte little-endian
//! header length, a JSON header naming each tensor's dtype, shape and byte range, then
//! the raw little-endian row-major data. Plain dtypes only (safetensors has no block
//! formats; tempra-llm writes GGUF for those).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use tempra_tensor::{DType, ExecContext, Tensor};

use crate::error::{AutogradError, Result};

/// The largest header accepted when reading (the format's own limit is 100 MB).
const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;

/// The tensors and free-form metadata of one safetensors file, in file (data) order.
#[derive(Debug, Default)]
pub struct SafeTensors {
    /// Named tensors, contiguous, from the context's pool.
    pub tensors: Vec<(String, Tensor)>,
    /// The `__metadata__` string pairs, sorted by key.
    pub metadata: Vec<(String, String)>,
}

/// The safetensors dtype name of `dtype`, or `None` for dtypes it cannot hold.
fn dtype_name(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F64 => "F64",
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I32 => "I32",
        DType::U32 => "U32",
        DType::U8 => "U8",
        _ => return None,
    })
}

fn dtype_from_name(name: &str) -> Option<DType> {
    Some(match name {
        "F64" => DType::F64,
        "F32" => DType::F32,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "I32" => DType::I32,
        "U32" => DType::U32,
        "U8" => DType::U8,
        _ => return None,
    })
}

/// The file bytes for `tensors` (any layout: strided ones are made contiguous) and
/// `metadata`.
pub fn serialize(
    ctx: &ExecContext,
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, &str)],
) -> Result<Vec<u8>> {
    let mut header = Map::new();
    if !metadata.is_empty() {
        let meta: Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        header.insert("__metadata__".into(), Value::Object(meta));
    }
    let mut data = Vec::new();
    for &(name, tensor) in tensors {
        let bad = |reason: String| AutogradError::Parameter {
            name: name.to_string(),
            reason,
        };
        let dtype_str = dtype_name(tensor.dtype()).ok_or_else(|| {
            bad(format!(
                "safetensors cannot hold dtype {} (plain dtypes only)",
                tensor.dtype()
            ))
        })?;
        if name == "__metadata__" || header.contains_key(name) {
            return Err(bad("duplicate or reserved tensor name".into()));
        }
        let bytes = tensor_bytes(ctx, tensor)?;
        let begin = data.len();
        data.extend_from_slice(&bytes);
        let mut entry = Map::new();
        entry.insert("dtype".into(), Value::from(dtype_str));
        entry.insert("shape".into(), Value::from(tensor.dims().to_vec()));
        entry.insert("data_offsets".into(), Value::from(vec![begin, data.len()]));
        header.insert(name.to_string(), Value::Object(entry));
    }
    let mut json =
        serde_json::to_vec(&Value::Object(header)).map_err(|e| AutogradError::Argument {
            op: "safetensors::serialize",
            name: "header",
            reason: e.to_string(),
        })?;
    // Pad the header with spaces so the data starts 8-byte aligned.
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + json.len() + data.len());
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&data);
    Ok(out)
}

/// The row-major bytes of `tensor` (from any storage, device included).
fn tensor_bytes(ctx: &ExecContext, tensor: &Tensor) -> Result<Vec<u8>> {
    let dense = ctx.contiguous(tensor)?;
    let dtype = dense.dtype();
    let overflow = || tempra_tensor::TensorError::Overflow {
        op: "safetensors",
        shape: *dense.shape(),
    };
    let len = dtype.bytes_for(dense.elem_count()).ok_or_else(overflow)?;
    let start = dtype
        .bytes_for(dense.layout().offset())
        .ok_or_else(overflow)?;
    let mut bytes = vec![0u8; len];
    dense.storage().read_bytes(start, &mut bytes)?;
    Ok(bytes)
}

/// Writes `tensors` and `metadata` to `path`.
pub fn save(
    ctx: &ExecContext,
    path: &Path,
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, &str)],
) -> Result<()> {
    let bytes = serialize(ctx, tensors, metadata)?;
    std::fs::write(path, bytes).map_err(|source| AutogradError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads the safetensors file at `path` into tensors from `ctx`'s pool.
pub fn load(ctx: &ExecContext, path: &Path) -> Result<SafeTensors> {
    let bytes = std::fs::read(path).map_err(|source| AutogradError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    deserialize(ctx, &bytes, path)
}

/// Parses safetensors `bytes` (`origin` names them in errors). Every length, offset and
/// shape is checked; a malformed file is an error naming the tensor and the problem.
pub fn deserialize(ctx: &ExecContext, bytes: &[u8], origin: &Path) -> Result<SafeTensors> {
    let bad = |reason: String| AutogradError::Format {
        path: PathBuf::from(origin),
        reason,
    };
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            bad(format!(
                "{} bytes is too short for the 8-byte header length",
                bytes.len()
            ))
        })?;
    let header_len = u64::from_le_bytes(len_bytes);
    let available = (bytes.len() - 8) as u64;
    if header_len > available || header_len > MAX_HEADER_BYTES {
        return Err(bad(format!(
            "header length {header_len} exceeds the {available} bytes after it (or 100 MB)"
        )));
    }
    let header_end = 8 + header_len as usize;
    let header: Value = serde_json::from_slice(&bytes[8..header_end])
        .map_err(|e| bad(format!("header JSON: {e}")))?;
    let Value::Object(header) = header else {
        return Err(bad("the header is not a JSON object".into()));
    };
    let data = &bytes[header_end..];
    let mut out = SafeTensors::default();
    let mut entries = Vec::new();
    for (name, entry) in &header {
        if name == "__metadata__" {
            let Value::Object(meta) = entry else {
                return Err(bad("__metadata__ is not an object".into()));
            };
            for (k, v) in meta {
                let v = v
                    .as_str()
                    .ok_or_else(|| bad(format!("__metadata__ value of `{k}` is not a string")))?;
                out.metadata.push((k.clone(), v.to_string()));
            }
            continue;
        }
        entries.push(
            parse_entry(name, entry, data.len())
                .map_err(|reason| bad(format!("tensor `{name}`: {reason}")))?,
        );
    }
    entries.sort_by_key(|e| e.begin);
    for e in entries {
        let tensor =
            ctx.persistent_copy(&ctx.from_bytes(&data[e.begin..e.end], &e.dims, e.dtype)?)?;
        out.tensors.push((e.name, tensor));
    }
    Ok(out)
}

/// One header entry, checked.
struct Entry {
    name: String,
    dtype: DType,
    dims: Vec<usize>,
    begin: usize,
    end: usize,
}

fn parse_entry(name: &str, entry: &Value, data_len: usize) -> std::result::Result<Entry, String> {
    let obj = entry.as_object().ok_or("entry is not an object")?;
    let dtype_str = obj
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or("missing string `dtype`")?;
    let dtype =
        dtype_from_name(dtype_str).ok_or_else(|| format!("unsupported dtype {dtype_str}"))?;
    let dims = obj
        .get("shape")
        .and_then(Value::as_array)
        .ok_or("missing array `shape`")?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or("`shape` holds a non-integer")?;
    let offsets = obj
        .get("data_offsets")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 2)
        .ok_or("missing two-element `data_offsets`")?;
    let offset = |i: usize| offsets[i].as_u64().and_then(|o| usize::try_from(o).ok());
    let (begin, end) = offset(0)
        .zip(offset(1))
        .ok_or("`data_offsets` holds a non-integer")?;
    if begin > end || end > data_len {
        return Err(format!(
            "data_offsets [{begin}, {end}] outside the {data_len} data bytes"
        ));
    }
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or("shape overflows")?;
    let expected = dtype.bytes_for(count).ok_or("shape overflows")?;
    if end - begin != expected {
        return Err(format!(
            "{} bytes for shape {dims:?} of {dtype_str}, which needs {expected}",
            end - begin
        ));
    }
    Ok(Entry {
        name: name.to_string(),
        dtype,
        dims,
        begin,
        end,
    })
}

#[cfg(test)]
mod tests {
    use tempra_tensor::DType;

    use super::{dtype_from_name, dtype_name};

    #[test]
    fn dtype_names_round_trip_and_blocks_have_none() {
        for dtype in [
            DType::F64,
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U32,
            DType::U8,
        ] {
            assert_eq!(dtype_name(dtype).and_then(dtype_from_name), Some(dtype));
        }
        assert_eq!(dtype_name(DType::Q4_0), None);
        assert_eq!(dtype_from_name("I64"), None);
    }
}
