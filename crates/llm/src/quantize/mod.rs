//! Model quantization: `tempra quantize` as a library. Reads an F32/F16/BF16 model,
//! chooses each tensor's dtype with llama.cpp's per-tensor rules
//! ([`TensorTypePlanner`]), and streams the converted tensors into a new GGUF file, one
//! batch of rows at a time (memory stays a few MiB above the mapped input).
//!
//! ```no_run
//! use tempra_llm::ModelFile;
//! use tempra_llm::quantize::{QuantType, quantize_model};
//!
//! let model = ModelFile::open("model-f16.gguf")?;
//! let out = std::io::BufWriter::new(std::fs::File::create("model-q4_k_m.gguf").unwrap());
//! let summary = quantize_model(&model, QuantType::Q4KM, out, &mut |_, plan| {
//!     eprintln!("{} {} -> {}", plan.name, plan.from, plan.to);
//! })?;
//! eprintln!("{} of {} tensors converted", summary.converted, summary.tensors);
//! # Ok::<(), tempra_llm::LlmError>(())
//! ```

mod planner;
mod quant_type;
mod rows;

pub use planner::{TensorPlan, TensorTypePlanner};
pub use quant_type::QuantType;
pub use rows::{decode_rows, encode_rows, encode_rows_parallel};

use std::io::Write;

use tempra_tensor::DType;

use crate::error::{LlmError, Result};
use crate::gguf::{GgufWriter, TensorSpec, keys};
use crate::model_file::ModelFile;

/// ggml's quantization format version, stored as `general.quantization_version`.
pub const QUANTIZATION_VERSION: u32 = 2;

/// Values converted per batch: bounds the memory a tensor's conversion needs.
const BATCH_VALUES: usize = 1 << 20;

/// What [`quantize_model`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuantizeSummary {
    /// Tensors written.
    pub tensors: usize,
    /// Tensors whose dtype changed.
    pub converted: usize,
    /// Tensors that got a fallback dtype because of their row length.
    pub fallbacks: usize,
    /// Bytes of tensor data read.
    pub bytes_in: u64,
    /// Bytes of tensor data written.
    pub bytes_out: u64,
}

/// The plan for every tensor of `model`, in file order.
pub fn plan_model(model: &ModelFile, qtype: QuantType) -> Vec<TensorPlan> {
    let specs: Vec<TensorSpec> = model
        .tensor_infos()
        .iter()
        .map(|t| t.spec.clone())
        .collect();
    let mut planner = TensorTypePlanner::new(qtype, model.metadata(), &specs);
    specs.iter().map(|s| planner.plan(s)).collect()
}

/// Quantizes `model` to `qtype`, writing a GGUF file to `out`; `on_tensor(index, plan)`
/// is called after each tensor is written (for progress bars).
///
/// The metadata is copied, with `general.file_type` and `general.quantization_version`
/// set. Tensors that keep their dtype are copied byte for byte.
///
/// Errors: a tensor that is already block-quantized and would change dtype is an
/// [`LlmError::TensorData`] (quantize from an F32/F16/BF16 model); write failures are
/// [`LlmError::Io`].
pub fn quantize_model<W: Write>(
    model: &ModelFile,
    qtype: QuantType,
    out: W,
    on_tensor: &mut dyn FnMut(usize, &TensorPlan),
) -> Result<QuantizeSummary> {
    let plans = plan_model(model, qtype);
    for plan in &plans {
        if plan.from != plan.to && !plan.from.is_float() {
            return Err(LlmError::TensorData {
                name: plan.name.clone(),
                what: format!(
                    "is already {}; quantize from an F32, F16 or BF16 model",
                    plan.from
                ),
            });
        }
    }
    let mut metadata = model.metadata().clone();
    metadata.set(keys::GENERAL_FILE_TYPE, qtype.file_type());
    metadata.set(keys::GENERAL_QUANTIZATION_VERSION, QUANTIZATION_VERSION);
    let specs = model
        .tensor_infos()
        .iter()
        .zip(&plans)
        .map(|(info, plan)| TensorSpec {
            dtype: plan.to,
            ..info.spec.clone()
        })
        .collect();
    let mut writer = GgufWriter::new(out, &metadata, specs)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut summary = QuantizeSummary {
        tensors: plans.len(),
        ..Default::default()
    };
    for (i, (info, plan)) in model.tensor_infos().iter().zip(&plans).enumerate() {
        let bytes = model.tensor_bytes(info)?;
        summary.bytes_in += bytes.len() as u64;
        if plan.to == plan.from {
            writer.write_data(bytes)?;
            summary.bytes_out += bytes.len() as u64;
        } else {
            summary.bytes_out += convert_tensor(bytes, &info.spec, plan.to, &mut writer, threads)?;
            summary.converted += 1;
        }
        summary.fallbacks += plan.fallback as usize;
        on_tensor(i, plan);
    }
    writer.finish()?;
    Ok(summary)
}

/// Converts one tensor's bytes from `spec.dtype` to `to` in batches of rows, writing
/// each batch; returns the bytes written.
fn convert_tensor<W: Write>(
    src: &[u8],
    spec: &TensorSpec,
    to: DType,
    writer: &mut GgufWriter<W>,
    threads: usize,
) -> Result<u64> {
    let context = |e: LlmError| LlmError::TensorData {
        name: spec.name.clone(),
        what: e.to_string(),
    };
    let row_len = spec.row_len();
    let elems = spec.elem_count();
    if row_len == 0 || elems == 0 {
        return Ok(0);
    }
    let (src_row, dst_row) = match (spec.dtype.bytes_for(row_len), to.bytes_for(row_len)) {
        (Some(s), Some(d)) => (s, d),
        _ => {
            return Err(context(LlmError::Argument {
                what: format!("rows of {row_len} do not fit {to} blocks"),
            }));
        }
    };
    let batch_rows = (BATCH_VALUES / row_len).max(1);
    let mut values = Vec::new();
    let mut encoded = Vec::new();
    let mut written = 0u64;
    for chunk in src.chunks(batch_rows * src_row) {
        let rows = chunk.len() / src_row;
        values.resize(rows * row_len, 0.0);
        encoded.resize(rows * dst_row, 0);
        decode_rows(spec.dtype, chunk, &mut values).map_err(context)?;
        encode_rows_parallel(to, row_len, &values, &mut encoded, threads).map_err(context)?;
        writer.write_data(&encoded)?;
        written += encoded.len() as u64;
    }
    Ok(written)
}
