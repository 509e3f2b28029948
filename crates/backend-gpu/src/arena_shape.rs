//! `ArenaShape` and `ArenaCapacity`: the plain description of a transformer that a
//! [`crate::BufferArena`] is sized from, and the table of buffers it implies.
//!
//! The backend never imports an LLM crate: the engine fills an [`ArenaShape`] from its
//! model config, and [`ArenaShape::buffer_specs`] is the single source of every buffer's
//! shape, dtype and size (the arena allocates exactly this table).

use tempra_tensor::DType;

/// The model dimensions an arena's buffers are sized from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaShape {
    /// Model width `D` (the residual stream).
    pub hidden: usize,
    /// Query heads `Hq`.
    pub heads: usize,
    /// Key/value heads `Hkv` (divides `heads`).
    pub kv_heads: usize,
    /// Key (and query) head dim `Dk`.
    pub key_dim: usize,
    /// Value head dim `Dv`.
    pub value_dim: usize,
    /// Feed-forward width `F`.
    pub ffn: usize,
    /// Vocabulary size `V` (logit columns).
    pub vocab: usize,
    /// Transformer blocks (one K and one V cache buffer each).
    pub layers: usize,
    /// KV cache element type: F16 or F32.
    pub kv_dtype: DType,
}

/// How many positions an arena serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaCapacity {
    /// The most tokens one forward step processes (rows of the token-major buffers).
    pub max_batch_tokens: usize,
    /// The most rows one step computes logits for (`≤ max_batch_tokens`; decode needs 1,
    /// scoring every position of a batch needs `max_batch_tokens`).
    pub max_logit_rows: usize,
    /// Positions the KV cache holds (the context length).
    pub max_seq_len: usize,
}

/// What a buffer's rows are, which decides what the arena's zeroing touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferRole {
    /// One row per token of the step (`max_batch_tokens` rows).
    TokenRows,
    /// One row per logit row of the step (`max_logit_rows` rows).
    LogitRows,
    /// State carried between steps and requests: a layer's KV cache (`max_seq_len` rows).
    KvCache,
}

/// One buffer of the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    /// The field name (`hidden`, `q`, `keys`, ...).
    pub name: &'static str,
    /// The layer, for the per-layer KV cache buffers.
    pub layer: Option<usize>,
    /// The dims; the first is the row count.
    pub dims: Vec<usize>,
    /// The element type.
    pub dtype: DType,
    /// What its rows are.
    pub role: BufferRole,
}

impl BufferSpec {
    fn new(name: &'static str, dims: &[usize], dtype: DType, role: BufferRole) -> Self {
        Self {
            name,
            layer: None,
            dims: dims.to_vec(),
            dtype,
            role,
        }
    }

    /// Elements.
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// Bytes of data (`elements · dtype size`; the device buffer rounds up to 4).
    pub fn bytes(&self) -> usize {
        self.elements() * self.dtype.block_bytes()
    }

    /// Bytes of one row (the first dim).
    pub fn row_bytes(&self) -> usize {
        self.bytes() / self.dims[0].max(1)
    }
}

impl ArenaShape {
    /// Checks the shape and capacity describe something allocatable: every size at least
    /// 1, `kv_heads` dividing `heads`, an F16 or F32 cache, and
    /// `max_logit_rows ≤ max_batch_tokens`. Returns what is wrong.
    pub fn validate(&self, capacity: &ArenaCapacity) -> Result<(), String> {
        let sizes = [
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("key_dim", self.key_dim),
            ("value_dim", self.value_dim),
            ("ffn", self.ffn),
            ("vocab", self.vocab),
            ("layers", self.layers),
            ("max_batch_tokens", capacity.max_batch_tokens),
            ("max_logit_rows", capacity.max_logit_rows),
            ("max_seq_len", capacity.max_seq_len),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} is 0"));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "{} query heads are not a multiple of {} KV heads",
                self.heads, self.kv_heads
            ));
        }
        if !matches!(self.kv_dtype, DType::F16 | DType::F32) {
            return Err(format!("a KV cache of {}: use f16 or f32", self.kv_dtype));
        }
        if capacity.max_logit_rows > capacity.max_batch_tokens {
            return Err(format!(
                "max_logit_rows {} exceeds max_batch_tokens {}",
                capacity.max_logit_rows, capacity.max_batch_tokens
            ));
        }
        Ok(())
    }

    /// Every buffer an arena of this shape and capacity holds, in allocation order: the
    /// step's inputs, the activations of one block (reused by every layer), the logits,
    /// then each layer's keys and values.
    ///
    /// With `T = max_batch_tokens`, `R = max_logit_rows`, `S = max_seq_len`:
    ///
    /// | buffer | dims | dtype |
    /// |---|---|---|
    /// | `token_ids`, `positions` | `[T]` | u32 |
    /// | `hidden` (residual stream), `norm`, `attn_out`, `ffn_down` | `[T, D]` | f32 |
    /// | `q`, `q_scratch` | `[T, Hq·Dk]` | f32 |
    /// | `k`, `k_scratch` | `[T, Hkv·Dk]` | f32 |
    /// | `v` | `[T, Hkv·Dv]` | f32 |
    /// | `attention` | `[T, Hq·Dv]` | f32 |
    /// | `ffn_gate`, `ffn_up`, `ffn_act` | `[T, F]` | f32 |
    /// | `logits`, `logits_scratch` | `[R, V]` | f32 |
    /// | `keys` (per layer) | `[S, Hkv, Dk]` | the KV dtype |
    /// | `values` (per layer) | `[S, Hkv, Dv]` | the KV dtype |
    pub fn buffer_specs(&self, capacity: &ArenaCapacity) -> Vec<BufferSpec> {
        use BufferRole::{KvCache, LogitRows, TokenRows};
        let t = capacity.max_batch_tokens;
        let r = capacity.max_logit_rows;
        let s = capacity.max_seq_len;
        let d = self.hidden;
        let qd = self.heads * self.key_dim;
        let kd = self.kv_heads * self.key_dim;
        let vd = self.kv_heads * self.value_dim;
        let ad = self.heads * self.value_dim;
        let f = self.ffn;
        let f32 = DType::F32;
        let mut specs = vec![
            BufferSpec::new("token_ids", &[t], DType::U32, TokenRows),
            BufferSpec::new("positions", &[t], DType::U32, TokenRows),
            BufferSpec::new("hidden", &[t, d], f32, TokenRows),
            BufferSpec::new("norm", &[t, d], f32, TokenRows),
            BufferSpec::new("q", &[t, qd], f32, TokenRows),
            BufferSpec::new("q_scratch", &[t, qd], f32, TokenRows),
            BufferSpec::new("k", &[t, kd], f32, TokenRows),
            BufferSpec::new("k_scratch", &[t, kd], f32, TokenRows),
            BufferSpec::new("v", &[t, vd], f32, TokenRows),
            BufferSpec::new("attention", &[t, ad], f32, TokenRows),
            BufferSpec::new("attn_out", &[t, d], f32, TokenRows),
            BufferSpec::new("ffn_gate", &[t, f], f32, TokenRows),
            BufferSpec::new("ffn_up", &[t, f], f32, TokenRows),
            BufferSpec::new("ffn_act", &[t, f], f32, TokenRows),
            BufferSpec::new("ffn_down", &[t, d], f32, TokenRows),
            BufferSpec::new("logits", &[r, self.vocab], f32, LogitRows),
            BufferSpec::new("logits_scratch", &[r, self.vocab], f32, LogitRows),
        ];
        for layer in 0..self.layers {
            for (name, dim) in [("keys", self.key_dim), ("values", self.value_dim)] {
                let mut spec =
                    BufferSpec::new(name, &[s, self.kv_heads, dim], self.kv_dtype, KvCache);
                spec.layer = Some(layer);
                specs.push(spec);
            }
        }
        specs
    }

    /// Total bytes of [`Self::buffer_specs`].
    pub fn arena_bytes(&self, capacity: &ArenaCapacity) -> usize {
        self.buffer_specs(capacity)
            .iter()
            .map(BufferSpec::bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Llama-like toy: D 64, 4 query heads and 2 KV heads of 16, F 172, V 320, 2
    /// layers, f16 cache; 8 tokens per step, 4 logit rows, 32 positions.
    fn toy() -> (ArenaShape, ArenaCapacity) {
        (
            ArenaShape {
                hidden: 64,
                heads: 4,
                kv_heads: 2,
                key_dim: 16,
                value_dim: 16,
                ffn: 172,
                vocab: 320,
                layers: 2,
                kv_dtype: DType::F16,
            },
            ArenaCapacity {
                max_batch_tokens: 8,
                max_logit_rows: 4,
                max_seq_len: 32,
            },
        )
    }

    #[test]
    fn sizes_match_the_hand_computed_table() {
        let (shape, cap) = toy();
        // (name, layer, dims, bytes), worked out by hand from the shape above.
        let table: [(&str, Option<usize>, &[usize], usize); 21] = [
            ("token_ids", None, &[8], 32),             // 8 · 4
            ("positions", None, &[8], 32),             // 8 · 4
            ("hidden", None, &[8, 64], 2048),          // 8 · 64 · 4
            ("norm", None, &[8, 64], 2048),            //
            ("q", None, &[8, 64], 2048),               // Hq·Dk = 64
            ("q_scratch", None, &[8, 64], 2048),       //
            ("k", None, &[8, 32], 1024),               // Hkv·Dk = 32
            ("k_scratch", None, &[8, 32], 1024),       //
            ("v", None, &[8, 32], 1024),               // Hkv·Dv = 32
            ("attention", None, &[8, 64], 2048),       // Hq·Dv = 64
            ("attn_out", None, &[8, 64], 2048),        //
            ("ffn_gate", None, &[8, 172], 5504),       // 8 · 172 · 4
            ("ffn_up", None, &[8, 172], 5504),         //
            ("ffn_act", None, &[8, 172], 5504),        //
            ("ffn_down", None, &[8, 64], 2048),        //
            ("logits", None, &[4, 320], 5120),         // 4 · 320 · 4
            ("logits_scratch", None, &[4, 320], 5120), //
            ("keys", Some(0), &[32, 2, 16], 2048),     // 32 · 2 · 16 · 2 (f16)
            ("values", Some(0), &[32, 2, 16], 2048),   //
            ("keys", Some(1), &[32, 2, 16], 2048),     //
            ("values", Some(1), &[32, 2, 16], 2048),   //
        ];
        let specs = shape.buffer_specs(&cap);
        assert_eq!(specs.len(), table.len());
        for (spec, (name, layer, dims, bytes)) in specs.iter().zip(table) {
            assert_eq!(
                (spec.name, spec.layer, spec.dims.as_slice(), spec.bytes()),
                (name, layer, dims, bytes)
            );
        }
        assert_eq!(shape.arena_bytes(&cap), 52_416);
        assert_eq!(specs[2].row_bytes(), 256);
    }

    #[test]
    fn invalid_shapes_say_what_is_wrong() {
        let (shape, cap) = toy();
        assert_eq!(shape.validate(&cap), Ok(()));
        let bad = ArenaShape {
            kv_heads: 3,
            ..shape
        };
        assert!(
            bad.validate(&cap)
                .unwrap_err()
                .contains("multiple of 3 KV heads")
        );
        let bad = ArenaShape { vocab: 0, ..shape };
        assert_eq!(bad.validate(&cap).unwrap_err(), "vocab is 0");
        let bad = ArenaShape {
            kv_dtype: DType::Q8_0,
            ..shape
        };
        assert!(bad.validate(&cap).unwrap_err().contains("use f16 or f32"));
        let cap2 = ArenaCapacity {
            max_logit_rows: 9,
            ..cap
        };
        assert!(
            shape
                .validate(&cap2)
                .unwrap_err()
                .contains("max_logit_rows 9")
        );
    }
}
