//! Random blocks of any weight format: how tests and benchmarks make weights in formats
//! tempra cannot quantize to (the IQ1, IQ2 and IQ3 formats), and every other format's
//! worst cases (bit patterns a quantizer never writes).

use half::f16;

use super::dequantize_row;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::random::SplitMix64;

/// Where a block keeps its f16 scales.
enum ScaleFields {
    /// Whole f16 fields at these byte offsets (a scale and, for formats with one, the
    /// scale of the mins).
    At(&'static [usize]),
    /// IQ1_M: one f16 spread over the top nibbles of the four 16-bit words at byte 48.
    Iq1m,
    /// MXFP4: an E8M0 exponent byte at byte 0 (the power of two nearest the scale).
    E8m0,
}

/// The scale fields of a weight format, or `None` for the activation formats and plain
/// dtypes.
fn scale_fields(dtype: DType) -> Option<ScaleFields> {
    use ScaleFields::At;
    Some(match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => At(&[0]),
        DType::Q3K => At(&[108]),
        DType::Q4_1 | DType::Q5_1 | DType::Q4K | DType::Q5K => At(&[0, 2]),
        DType::Q2K => At(&[80, 82]),
        DType::Q6K => At(&[208]),
        DType::IQ2XXS | DType::IQ2XS | DType::IQ2S | DType::IQ3XXS | DType::IQ3S => At(&[0]),
        DType::IQ1S | DType::IQ4NL | DType::IQ4XS => At(&[0]),
        DType::TQ1_0 => At(&[52]),
        DType::TQ2_0 => At(&[64]),
        DType::IQ1M => ScaleFields::Iq1m,
        DType::MXFP4 => ScaleFields::E8m0,
        _ => return None,
    })
}

/// Writes `value` into every scale field of `block`.
fn set_scales(fields: &ScaleFields, block: &mut [u8], value: f16) {
    match fields {
        ScaleFields::At(offsets) => {
            for &o in *offsets {
                block[o..o + 2].copy_from_slice(&value.to_le_bytes());
            }
        }
        ScaleFields::Iq1m => {
            let bits = value.to_bits();
            for k in 0..4 {
                let at = 48 + 2 * k;
                let word = u16::from_le_bytes([block[at], block[at + 1]]);
                let word = (word & 0x0FFF) | (((bits >> (4 * k)) & 0xF) << 12);
                block[at..at + 2].copy_from_slice(&word.to_le_bytes());
            }
        }
        ScaleFields::E8m0 => {
            // The block's values are 2^(e − 128) · level.
            let e = (value.to_f32().abs().max(f32::MIN_POSITIVE).log2().round() + 128.0)
                .clamp(0.0, 255.0);
            block[0] = e as u8;
        }
    }
}

/// `blocks` blocks of the weight format `dtype` (any block format but the activation
/// formats Q8_1 and Q8_K) with uniformly random quant, index, sign and sub-scale bytes,
/// each block's f16 scales chosen so its values have a root mean square near `rms`
/// (MXFP4's power-of-two scale: within a factor √2 of it). The same arguments give the
/// same bytes.
///
/// Errors: [`TensorError::DType`] for a dtype that is not a weight block format.
pub fn random_blocks(dtype: DType, blocks: usize, rms: f32, seed: u64) -> Result<Vec<u8>> {
    let fields = scale_fields(dtype).ok_or(TensorError::DType {
        op: "random_blocks",
        dtype,
        what: "a weight block format",
    })?;
    let (block_bytes, block_len) = (dtype.block_bytes(), dtype.block_len());
    let mut rng = SplitMix64::new(seed);
    let mut out = vec![0u8; blocks * block_bytes];
    let mut values = vec![0f32; block_len];
    for block in out.chunks_exact_mut(block_bytes) {
        for chunk in block.chunks_mut(8) {
            let bits = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bits[..chunk.len()]);
        }
        set_scales(&fields, block, f16::ONE);
        dequantize_row(dtype, block, &mut values)?;
        let unit_rms =
            (values.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / block_len as f64).sqrt();
        let scale = if unit_rms > 0.0 && unit_rms.is_finite() {
            rms as f64 / unit_rms
        } else {
            1.0
        };
        set_scales(&fields, block, f16::from_f64(scale));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_unit_scale_values() {
        let formats = DType::ALL.into_iter().filter(|d| d.is_quantized());
        for dtype in formats {
            let Ok(bytes) = random_blocks(dtype, 4, 1.0, 7) else {
                assert!(matches!(dtype, DType::Q8_1 | DType::Q8K), "{dtype}");
                continue;
            };
            assert_eq!(
                bytes,
                random_blocks(dtype, 4, 1.0, 7).unwrap(),
                "{dtype} seeded"
            );
            // A power-of-two scale lands within a factor 2 of the mean square.
            let (low, high) = if dtype == DType::MXFP4 {
                (0.5, 2.0)
            } else {
                (0.8, 1.25)
            };
            let mut values = vec![0f32; 4 * dtype.block_len()];
            dequantize_row(dtype, &bytes, &mut values).unwrap();
            let ms = values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32;
            assert!((low..high).contains(&ms), "{dtype}: mean square {ms}");
            let small = random_blocks(dtype, 4, 0.01, 7).unwrap();
            dequantize_row(dtype, &small, &mut values).unwrap();
            let ms = values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32;
            assert!(
                (low * 1e-4..high * 1e-4).contains(&ms),
                "{dtype}: mean square {ms} at rms 0.01"
            );
        }
        assert!(random_blocks(DType::F32, 1, 1.0, 0).is_err());
    }
}
