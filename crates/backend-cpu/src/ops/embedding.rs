//! Embedding lookup: rows of a `[V, D]` table of any float or block dtype, picked by U32
//! ids, into F32 rows (block rows dequantized with the `quant` reference dequantizer,
//! f16/bf16 rows converted with SIMD).

use half::{bf16, f16};
use tempra_tensor::{DType, Result, Tensor, TensorError, quant};

use crate::kernels::convert;
use crate::ops::{Exec, MIN_CHEAP, Outcome, input, min_rows, output};
use crate::strided::Walk;

/// `out [.., D]` = `table[ids[..]]`; an id ≥ V is an error naming it and its position.
pub(crate) fn embedding(
    exec: &Exec<'_>,
    table: &Tensor,
    ids: &Tensor,
    out: &mut Tensor,
) -> Result<Outcome> {
    let dtype = table.dtype();
    if dtype == DType::F64
        || table.rank() != 2
        || ids.dtype() != DType::U32
        || out.dtype() != DType::F32
    {
        return Ok(Outcome::Delegate);
    }
    let (vocab, d) = (table.dims()[0], table.dims()[1]);
    let Some(id_data) = input::<u32>(ids) else {
        return Ok(Outcome::Delegate);
    };
    let id_walk = Walk::new([ids.layout()]);
    let [id_stride] = id_walk.inner_strides();
    // Check every id first, so the parallel copy below cannot fail half way.
    let mut bad = None;
    let mut position = 0;
    id_walk.for_each_run(0..ids.elem_count(), |[o], len| {
        for i in 0..len {
            let id = id_data[o + i * id_stride] as usize;
            if id >= vocab && bad.is_none() {
                bad = Some((id, position));
            }
            position += 1;
        }
    });
    if let Some((id, position)) = bad {
        return Err(TensorError::Argument {
            op: "embedding",
            name: "ids",
            reason: format!(
                "id {id} at position {position} is out of range for a vocabulary of {vocab}"
            ),
        });
    }
    let (row_stride, col_stride) = (table.layout().strides()[0], table.layout().strides()[1]);
    let base = table.layout().offset();
    let level = exec.level;
    let Ok(bytes) = table.storage().host_bytes() else {
        return Ok(Outcome::Delegate);
    };
    // The typed views a row copy may need (`None` when misaligned: delegate).
    let f32s = if dtype == DType::F32 {
        Some(input::<f32>(table))
    } else {
        None
    };
    let f16s = if dtype == DType::F16 {
        Some(input::<f16>(table))
    } else {
        None
    };
    let bf16s = if dtype == DType::BF16 {
        Some(input::<bf16>(table))
    } else {
        None
    };
    if matches!(f32s, Some(None)) || matches!(f16s, Some(None)) || matches!(bf16s, Some(None)) {
        return Ok(Outcome::Delegate);
    }
    let (f32s, f16s, bf16s) = (f32s.flatten(), f16s.flatten(), bf16s.flatten());
    if !(dtype.is_quantized() || matches!(dtype, DType::F32 | DType::F16 | DType::BF16)) {
        return Ok(Outcome::Delegate);
    }
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if d == 0 {
        return Ok(Outcome::Done);
    }
    let failure = std::sync::Mutex::new(None);
    exec.workers
        .parallel_chunks_mut(y, d, min_rows(d, MIN_CHEAP), |positions, part| {
            let mut p = 0;
            id_walk.for_each_run(positions, |[o], len| {
                for i in 0..len {
                    let id = id_data[o + i * id_stride] as usize;
                    let row = base + id * row_stride;
                    let dst = &mut part[p * d..(p + 1) * d];
                    p += 1;
                    if dtype.is_quantized() {
                        let bb = dtype.block_bytes();
                        let blocks = d / dtype.block_len();
                        if let Err(e) =
                            quant::dequantize_row(dtype, &bytes[row * bb..(row + blocks) * bb], dst)
                        {
                            failure
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(e);
                        }
                    } else if let Some(t) = f32s {
                        strided_or(
                            t,
                            row,
                            col_stride,
                            dst,
                            |s, dst| dst.copy_from_slice(s),
                            |v| v,
                        );
                    } else if let Some(t) = f16s {
                        strided_or(
                            t,
                            row,
                            col_stride,
                            dst,
                            |s, dst| convert::f16_to_f32(level, s, dst),
                            f16::to_f32,
                        );
                    } else if let Some(t) = bf16s {
                        strided_or(
                            t,
                            row,
                            col_stride,
                            dst,
                            |s, dst| convert::bf16_to_f32(level, s, dst),
                            bf16::to_f32,
                        );
                    }
                }
            });
        });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(Outcome::Done)
}

/// `contiguous(&table[row..row + D], dst)` for a unit-stride row, else an element loop.
#[inline]
fn strided_or<T: Copy>(
    table: &[T],
    row: usize,
    stride: usize,
    dst: &mut [f32],
    contiguous: impl Fn(&[T], &mut [f32]),
    one: impl Fn(T) -> f32,
) {
    let d = dst.len();
    if stride == 1 {
        contiguous(&table[row..row + d], dst);
    } else {
        for (i, v) in dst.iter_mut().enumerate() {
            *v = one(table[row + i * stride]);
        }
    }
}
