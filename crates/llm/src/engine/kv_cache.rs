//! `KvCache`: per-layer K and V buffers, allocated once per session through the
//! backend (host memory on the CPU, device memory on the GPU), in a float or a
//! 32-value block format, keys and values each their own.

use std::fmt;

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::error::{LlmError, Result};

/// The storage dtypes of a KV cache: keys and values separately (`--kv-type-k`,
/// `--kv-type-v`; `--kv-type` sets both).
///
/// F16 (the default) and F32 hold the rows as computed (rounded to f16); the block
/// formats Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 quantize each row of a head as it is written
/// (ggml's reference rounding) and attention reads the blocks directly, dequantizing a
/// block of keys at a time. Q8_0 takes 34 bytes per 32 values (53% of f16), Q4_0 18
/// (28%).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvTypes {
    /// The keys' dtype.
    pub keys: DType,
    /// The values' dtype.
    pub values: DType,
}

impl KvTypes {
    /// The dtypes a cache stores rows in.
    pub const SUPPORTED: [DType; 7] = [
        DType::F16,
        DType::F32,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
    ];

    /// Keys and values both in `dtype`.
    pub const fn same(dtype: DType) -> KvTypes {
        KvTypes {
            keys: dtype,
            values: dtype,
        }
    }

    /// Checks that each dtype is one a cache stores, and that a block format's rows
    /// (`key_dim`, `value_dim` values per head) are whole blocks. Errors
    /// ([`LlmError::Argument`]) name the option (`--kv-type-k`, `--kv-type-v`) and the
    /// head width.
    pub fn check(&self, key_dim: usize, value_dim: usize) -> Result<()> {
        for (option, dtype, dim) in [
            ("--kv-type-k", self.keys, key_dim),
            ("--kv-type-v", self.values, value_dim),
        ] {
            let what = if !Self::SUPPORTED.contains(&dtype) {
                format!(
                    "{option} {dtype}: a KV cache stores f16, f32, q8_0, q4_0, q4_1, q5_0 or q5_1"
                )
            } else if !dim.is_multiple_of(dtype.block_len()) {
                format!(
                    "{option} {dtype}: stores blocks of {} values, and this model's heads hold {dim}",
                    dtype.block_len()
                )
            } else {
                continue;
            };
            return Err(LlmError::Argument { what });
        }
        Ok(())
    }

    /// The bytes one position takes in one layer: `kv_heads` rows of `key_dim` keys and
    /// `value_dim` values (for a checked pair of dtypes).
    pub fn position_bytes(&self, kv_heads: usize, key_dim: usize, value_dim: usize) -> usize {
        let row = |dtype: DType, dim: usize| dtype.bytes_for(kv_heads * dim).unwrap_or(usize::MAX);
        row(self.keys, key_dim).saturating_add(row(self.values, value_dim))
    }
}

impl fmt::Display for KvTypes {
    /// `q8_0` when keys and values agree, else `k q8_0, v f16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.keys == self.values {
            write!(f, "{}", self.keys)
        } else {
            write!(f, "k {}, v {}", self.keys, self.values)
        }
    }
}

/// Keys and values of every layer for up to `capacity` positions: one owned buffer per
/// layer for K and one for V (`[capacity, Hkv, D]`), allocated once through
/// [`ExecContext::zeros_persistent`], never pooled.
/// [`KvCache::reset`] only sets `len = 0`; attention reads a zero-copy `narrow` of the
/// first `len` rows.
#[derive(Debug)]
pub struct KvCache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    len: usize,
    capacity: usize,
    types: KvTypes,
}

impl KvCache {
    /// A cache for `layers` layers of `capacity` positions, `kv_heads` heads of
    /// `key_dim`/`value_dim` values, stored as `types` in `ctx`'s backend.
    ///
    /// Errors: what [`KvTypes::check`] refuses, or an allocation failure.
    pub fn new(
        ctx: &ExecContext,
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        key_dim: usize,
        value_dim: usize,
        types: KvTypes,
    ) -> Result<KvCache> {
        types.check(key_dim, value_dim)?;
        let mut keys = Vec::with_capacity(layers);
        let mut values = Vec::with_capacity(layers);
        for _ in 0..layers {
            keys.push(ctx.zeros_persistent(&[capacity, kv_heads, key_dim], types.keys)?);
            values.push(ctx.zeros_persistent(&[capacity, kv_heads, value_dim], types.values)?);
        }
        Ok(KvCache {
            keys,
            values,
            len: 0,
            capacity,
            types,
        })
    }

    /// The bytes a cache of these dimensions reserves (what [`KvCache::bytes`] reports
    /// once it is made).
    pub fn reserved_bytes(
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        key_dim: usize,
        value_dim: usize,
        types: KvTypes,
    ) -> usize {
        types
            .position_bytes(kv_heads, key_dim, value_dim)
            .saturating_mul(layers)
            .saturating_mul(capacity)
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most positions the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Where the keys and values live: `"host"` or the device backend's name.
    pub fn location(&self) -> &'static str {
        self.keys.first().map_or("host", |k| k.storage().location())
    }

    /// Bytes the keys and values hold.
    pub fn bytes(&self) -> usize {
        self.keys
            .iter()
            .chain(&self.values)
            .map(|t| t.layout().bytes_spanned())
            .sum()
    }

    /// The storage dtypes.
    pub fn types(&self) -> KvTypes {
        self.types
    }

    /// Forgets every position (no memory is touched).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `n` positions (no-op when `n ≥ len`).
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    /// Writes `k [T, Hkv, Dk]` and `v [T, Hkv, Dv]` of layer `layer` at positions
    /// `len..len+T` (converted to the cache's dtypes: rounded, or quantized row by row).
    /// The caller advances `len` with [`KvCache::advance`] once every layer is written.
    pub fn write(&mut self, ctx: &ExecContext, layer: usize, k: &Tensor, v: &Tensor) -> Result<()> {
        let t = k.dims().first().copied().unwrap_or(0);
        if self.len + t > self.capacity {
            return Err(LlmError::ContextFull {
                needed: self.len + t,
                capacity: self.capacity,
            });
        }
        ctx.write_slice(&mut self.keys[layer], 0, self.len, k)?;
        ctx.write_slice(&mut self.values[layer], 0, self.len, v)?;
        Ok(())
    }

    /// Zero-copy views of layer `layer`'s first `len + extra` positions (the cached ones
    /// plus those just written).
    pub fn view(&self, layer: usize, extra: usize) -> Result<(Tensor, Tensor)> {
        let n = self.len + extra;
        Ok((
            self.keys[layer].narrow(0, 0, n)?,
            self.values[layer].narrow(0, 0, n)?,
        ))
    }

    /// Makes this cache hold `source`'s first `n` positions (a fork: the continuations of
    /// one prompt share its prefill). Stored blocks are copied as they are, so a fork
    /// reads bit-identical keys and values whatever the cache's dtypes.
    ///
    /// Errors: caches of different shapes or dtypes, `n` past `source`'s length.
    pub fn copy_prefix_from(
        &mut self,
        ctx: &ExecContext,
        source: &KvCache,
        n: usize,
    ) -> Result<()> {
        let same_shape = self.types == source.types
            && self.keys.len() == source.keys.len()
            && self
                .keys
                .iter()
                .zip(&source.keys)
                .all(|(a, b)| a.dims()[1..] == b.dims()[1..])
            && self
                .values
                .iter()
                .zip(&source.values)
                .all(|(a, b)| a.dims()[1..] == b.dims()[1..]);
        if !same_shape {
            return Err(LlmError::Argument {
                what:
                    "a KV cache can only copy positions from a cache of the same model and dtypes"
                        .into(),
            });
        }
        if n > source.len || n > self.capacity {
            return Err(LlmError::ContextFull {
                needed: n,
                capacity: source.len.min(self.capacity),
            });
        }
        self.len = 0;
        if n > 0 {
            for (dst, src) in self
                .keys
                .iter_mut()
                .zip(&source.keys)
                .chain(self.values.iter_mut().zip(&source.values))
            {
                ctx.write_slice(dst, 0, 0, &src.narrow(0, 0, n)?)?;
            }
        }
        self.len = n;
        Ok(())
    }

    /// Counts `t` newly written positions.
    pub fn advance(&mut self, t: usize) {
        self.len = (self.len + t).min(self.capacity);
    }
}
