//! Row codecs: decode any float or block dtype to f32 and encode f32 to any of them, the
//! inner loop of quantization and of the random-model generator.

use half::{bf16, f16};
use tempra_tensor::{DType, quant};

use crate::error::{LlmError, Result};

fn length_error(op: &str, dtype: DType, values: usize, bytes: usize) -> LlmError {
    LlmError::Argument {
        what: format!("{op}: {values} {dtype} values do not take {bytes} bytes"),
    }
}

/// Decodes `src`, whole rows of `dtype` (F32, F16, BF16, F64 or a block format), into
/// `dst`, which must hold exactly their values.
pub fn decode_rows(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    if dtype.is_quantized() {
        return Ok(quant::dequantize_row(dtype, src, dst)?);
    }
    if dtype.bytes_for(dst.len()) != Some(src.len()) {
        return Err(length_error("decode_rows", dtype, dst.len(), src.len()));
    }
    match dtype {
        DType::F32 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            }
        }
        DType::F16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = f16::from_le_bytes([s[0], s[1]]).to_f32();
            }
        }
        DType::BF16 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = bf16::from_le_bytes([s[0], s[1]]).to_f32();
            }
        }
        DType::F64 => {
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(8)) {
                *d = f64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]) as f32;
            }
        }
        other => {
            return Err(LlmError::Argument {
                what: format!("decode_rows: {other} is not a float or block dtype"),
            });
        }
    }
    Ok(())
}

/// Encodes `src` into `dtype` (F32, F16, BF16 or a block format), writing exactly
/// `dtype.bytes_for(src.len())` bytes to `dst`. Block formats quantize with
/// [`tempra_tensor::quant::quantize_row`], so `src` must be whole blocks.
pub fn encode_rows(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    if dtype.is_quantized() {
        return Ok(quant::quantize_row(dtype, src, dst)?);
    }
    if dtype.bytes_for(src.len()) != Some(dst.len()) {
        return Err(length_error("encode_rows", dtype, src.len(), dst.len()));
    }
    match dtype {
        DType::F32 => {
            for (d, s) in dst.chunks_exact_mut(4).zip(src) {
                d.copy_from_slice(&s.to_le_bytes());
            }
        }
        DType::F16 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src) {
                d.copy_from_slice(&f16::from_f32(*s).to_le_bytes());
            }
        }
        DType::BF16 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src) {
                d.copy_from_slice(&bf16::from_f32(*s).to_le_bytes());
            }
        }
        other => {
            return Err(LlmError::Argument {
                what: format!("encode_rows: cannot encode to {other}"),
            });
        }
    }
    Ok(())
}

/// [`encode_rows`] split across up to `threads` threads at row boundaries (`row_len`
/// values per row): block quantization is the slow part of `tempra quantize`.
pub fn encode_rows_parallel(
    dtype: DType,
    row_len: usize,
    src: &[f32],
    dst: &mut [u8],
    threads: usize,
) -> Result<()> {
    let row_bytes = dtype.bytes_for(row_len).ok_or_else(|| LlmError::Argument {
        what: format!("encode_rows: a row of {row_len} values is not whole {dtype} blocks"),
    })?;
    let rows = src.len().checked_div(row_len).unwrap_or(0);
    if threads <= 1
        || rows < 2
        || row_bytes == 0
        || src.len() != rows * row_len
        || dst.len() != rows * row_bytes
    {
        return encode_rows(dtype, src, dst);
    }
    let per_thread = rows.div_ceil(threads.min(rows));
    std::thread::scope(|scope| {
        let workers: Vec<_> = src
            .chunks(per_thread * row_len)
            .zip(dst.chunks_mut(per_thread * row_bytes))
            .map(|(s, d)| scope.spawn(move || encode_rows(dtype, s, d)))
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join().map_err(|_| LlmError::Argument {
                what: "a quantization worker panicked".into(),
            })?
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_dtypes_round_trip() {
        let values: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 3.0).collect();
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let mut bytes = vec![0u8; dtype.bytes_for(64).unwrap()];
            encode_rows(dtype, &values, &mut bytes).unwrap();
            let mut back = vec![0f32; 64];
            decode_rows(dtype, &bytes, &mut back).unwrap();
            assert_eq!(back, values, "{dtype}");
        }
        assert!(encode_rows(DType::F16, &values, &mut [0u8; 3]).is_err());
        assert!(decode_rows(DType::U8, &[0u8; 64], &mut [0f32; 64]).is_err());
    }

    #[test]
    fn parallel_encoding_matches_serial() {
        let values: Vec<f32> = (0..32 * 7).map(|i| (i as f32 * 0.37).sin()).collect();
        for dtype in [DType::Q8_0, DType::Q4_0, DType::F16] {
            let n = dtype.bytes_for(values.len()).unwrap();
            let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
            encode_rows(dtype, &values, &mut a).unwrap();
            encode_rows_parallel(dtype, 32, &values, &mut b, 3).unwrap();
            assert_eq!(a, b, "{dtype}");
        }
    }
}
