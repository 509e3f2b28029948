//! The llama2.c legacy checkpoint: a 7-`i32` header, then f32 weights in a fixed order.

use tempra_tensor::{DType, Shape};

use crate::error::{LlmError, Result};
use crate::gguf::{TensorInfo, TensorSpec};
use crate::tensor_names::{BlockTensor, block_weight};

/// Bytes of the header: seven little-endian `i32`s.
pub const HEADER_LEN: usize = 28;

/// The first `u32` of llama2.c's newer (version 1/2) export format, which this loader
/// does not read.
const EXPORT_V1_MAGIC: u32 = 0x616b_3432;

/// The header of a llama2.c checkpoint (`Config` in `run.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Llama2cConfig {
    /// Model width.
    pub dim: usize,
    /// Feed-forward width.
    pub hidden_dim: usize,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Maximum sequence length.
    pub seq_len: usize,
    /// Whether the classifier shares the token embedding (a positive `vocab_size` in the
    /// header; negative means a separate `wcls` follows the weights).
    pub shared_classifier: bool,
}

fn err(offset: usize, what: impl Into<String>) -> LlmError {
    LlmError::Llama2c {
        file: "checkpoint",
        offset: offset as u64,
        what: what.into(),
    }
}

impl Llama2cConfig {
    /// Parses and validates the header at the start of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Llama2cConfig> {
        if bytes.len() < HEADER_LEN {
            return Err(err(
                0,
                format!(
                    "the file is {} bytes, shorter than the {HEADER_LEN}-byte header",
                    bytes.len()
                ),
            ));
        }
        let field = |i: usize| {
            i32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ])
        };
        if field(0) as u32 == EXPORT_V1_MAGIC {
            return Err(err(
                0,
                "llama2.c's versioned export format (magic \"ak42\") is not supported; export with --version 0",
            ));
        }
        let names = [
            "dim",
            "hidden_dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "vocab_size",
            "seq_len",
        ];
        let mut v = [0usize; 7];
        for (i, slot) in v.iter_mut().enumerate() {
            let raw = field(i);
            let value = if i == 5 {
                raw.unsigned_abs()
            } else {
                raw.max(0) as u32
            };
            if value == 0 || (i != 5 && raw < 0) {
                return Err(err(
                    4 * i,
                    format!("{} is {raw}; it must be positive", names[i]),
                ));
            }
            *slot = value as usize;
        }
        let config = Llama2cConfig {
            dim: v[0],
            hidden_dim: v[1],
            n_layers: v[2],
            n_heads: v[3],
            n_kv_heads: v[4],
            vocab_size: v[5],
            seq_len: v[6],
            shared_classifier: field(5) > 0,
        };
        if !config.dim.is_multiple_of(config.n_heads) || !config.head_size().is_multiple_of(2) {
            return Err(err(
                12,
                format!(
                    "n_heads {} must divide dim {} into even head sizes",
                    config.n_heads, config.dim
                ),
            ));
        }
        if config.n_kv_heads > config.n_heads || !config.n_heads.is_multiple_of(config.n_kv_heads) {
            return Err(err(
                16,
                format!(
                    "n_kv_heads {} must divide n_heads {}",
                    config.n_kv_heads, config.n_heads
                ),
            ));
        }
        Ok(config)
    }

    /// `dim / n_heads`.
    pub fn head_size(&self) -> usize {
        self.dim / self.n_heads
    }

    /// `n_kv_heads * head_size`.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_size()
    }

    /// The weights of a checkpoint of `file_len` bytes as GGUF-named tensors with
    /// absolute offsets into it, in GGUF order (token embedding, each block, output
    /// norm, classifier if not shared).
    ///
    /// Errors: sizes that overflow, or a `file_len` other than the exact size the header
    /// implies (checked before the list, whose length the header sets, is built).
    pub fn tensor_infos(&self, file_len: u64) -> Result<Vec<TensorInfo>> {
        let overflow = || err(0, "the weight sizes the header implies overflow");
        let (d, h, l, kv) = (self.dim, self.hidden_dim, self.n_layers, self.kv_dim());
        let mul = |a: usize, b: usize| a.checked_mul(b).ok_or_else(overflow);
        // Floats in each of llama2.c's arrays, in file order.
        let per_layer = [
            ("rms_att", d),
            ("wq", mul(d, d)?),
            ("wk", mul(kv, d)?),
            ("wv", mul(kv, d)?),
            ("wo", mul(d, d)?),
            ("rms_ffn", d),
            ("w1", mul(h, d)?),
            ("w2", mul(d, h)?),
            ("w3", mul(h, d)?),
        ];
        let mut offset = HEADER_LEN as u64;
        let mut starts = std::collections::HashMap::new();
        let mut advance = |name: &'static str, floats: usize| -> Result<()> {
            starts.insert(name, offset);
            let bytes = (floats as u64).checked_mul(4).ok_or_else(overflow)?;
            offset = offset.checked_add(bytes).ok_or_else(overflow)?;
            Ok(())
        };
        advance("token_embd", mul(self.vocab_size, d)?)?;
        for (name, floats) in per_layer {
            advance(name, mul(floats, l)?)?;
        }
        advance("rms_final", d)?;
        let freq_cis = mul(self.seq_len, self.head_size() / 2)?;
        advance("freq_cis_real", freq_cis)?;
        advance("freq_cis_imag", freq_cis)?;
        if !self.shared_classifier {
            advance("wcls", mul(self.vocab_size, d)?)?;
        }
        if file_len != offset {
            return Err(err(
                file_len.min(offset) as usize,
                format!("the file is {file_len} bytes but its header ({self:?}) implies {offset}"),
            ));
        }

        let f32_info = |name: String, dims: &[usize], offset: u64| -> Result<TensorInfo> {
            let shape = Shape::new(dims)?;
            Ok(TensorInfo {
                spec: TensorSpec::new(name, shape, DType::F32),
                offset,
                byte_len: shape.elem_count() as u64 * 4,
            })
        };
        let mut infos = vec![f32_info(
            "token_embd.weight".into(),
            &[self.vocab_size, d],
            starts["token_embd"],
        )?];
        let blocks: [(&str, BlockTensor, [usize; 2]); 9] = [
            ("rms_att", BlockTensor::AttnNorm, [d, 0]),
            ("wq", BlockTensor::AttnQ, [d, d]),
            ("wk", BlockTensor::AttnK, [kv, d]),
            ("wv", BlockTensor::AttnV, [kv, d]),
            ("wo", BlockTensor::AttnOutput, [d, d]),
            ("rms_ffn", BlockTensor::FfnNorm, [d, 0]),
            ("w1", BlockTensor::FfnGate, [h, d]),
            ("w2", BlockTensor::FfnDown, [d, h]),
            ("w3", BlockTensor::FfnUp, [h, d]),
        ];
        for layer in 0..l {
            for (array, kind, dims) in &blocks {
                let dims: &[usize] = if dims[1] == 0 { &dims[..1] } else { dims };
                let layer_bytes = dims.iter().product::<usize>() as u64 * 4;
                let offset = starts[array] + layer as u64 * layer_bytes;
                infos.push(f32_info(block_weight(layer, *kind), dims, offset)?);
            }
        }
        infos.push(f32_info(
            "output_norm.weight".into(),
            &[d],
            starts["rms_final"],
        )?);
        if !self.shared_classifier {
            infos.push(f32_info(
                "output.weight".into(),
                &[self.vocab_size, d],
                starts["wcls"],
            )?);
        }
        Ok(infos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(v: [i32; 7]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn parses_and_sizes_stories260k_header() {
        let c = Llama2cConfig::parse(&header([64, 172, 5, 8, 4, 512, 512])).unwrap();
        assert_eq!(
            (c.head_size(), c.kv_dim(), c.shared_classifier),
            (8, 32, true)
        );
        let infos = c.tensor_infos(1_056_540).unwrap();
        assert!(
            c.tensor_infos(1_056_539)
                .unwrap_err()
                .to_string()
                .contains("implies 1056540")
        );
        assert_eq!(infos.len(), 1 + 5 * 9 + 1);
        assert_eq!(infos[2].name(), "blk.0.attn_q.weight");
        assert_eq!(infos[2].shape().dims(), &[64, 64]);
    }

    #[test]
    fn bad_headers_are_errors() {
        for (v, field) in [
            ([0, 172, 5, 8, 4, 512, 512], "dim"),
            ([64, -1, 5, 8, 4, 512, 512], "hidden_dim"),
            ([64, 172, 5, 7, 4, 512, 512], "n_heads"),
            ([64, 172, 5, 8, 3, 512, 512], "n_kv_heads"),
            ([64, 172, 5, 8, 4, 0, 512], "vocab_size"),
        ] {
            let e = Llama2cConfig::parse(&header(v)).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        assert!(Llama2cConfig::parse(&[0; 27]).is_err());
        let big = Llama2cConfig::parse(&header([
            1 << 30,
            i32::MAX,
            i32::MAX,
            2,
            2,
            -i32::MAX,
            i32::MAX,
        ]))
        .unwrap();
        assert!(
            big.tensor_infos(1 << 20).is_err(),
            "overflow or size mismatch, never a panic"
        );
        // Billions of layers of tiny tensors: rejected by size before any list is built.
        let many = Llama2cConfig::parse(&header([2, 1, i32::MAX, 1, 1, 1, 1])).unwrap();
        assert!(many.tensor_infos(1 << 20).is_err());
    }
}
