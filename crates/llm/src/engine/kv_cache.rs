//! `KvCache`: per-layer K and V buffers, allocated once per session through the
//! backend (host memory on the CPU, device memory on the GPU).

use tempra_tensor::{DType, ExecContext, Tensor};

use crate::error::{LlmError, Result};

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
    dtype: DType,
}

impl KvCache {
    /// A cache for `layers` layers of `capacity` positions, `kv_heads` heads of
    /// `key_dim`/`value_dim` values, stored as `dtype` (F16 or F32) in `ctx`'s backend.
    pub fn new(
        ctx: &ExecContext,
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        key_dim: usize,
        value_dim: usize,
        dtype: DType,
    ) -> Result<KvCache> {
        if !matches!(dtype, DType::F16 | DType::F32) {
            return Err(LlmError::InvalidValue {
                key: "kv-type".into(),
                what: format!("{dtype}: use f16 or f32"),
            });
        }
        let mut keys = Vec::with_capacity(layers);
        let mut values = Vec::with_capacity(layers);
        for _ in 0..layers {
            keys.push(ctx.zeros_persistent(&[capacity, kv_heads, key_dim], dtype)?);
            values.push(ctx.zeros_persistent(&[capacity, kv_heads, value_dim], dtype)?);
        }
        Ok(KvCache {
            keys,
            values,
            len: 0,
            capacity,
            dtype,
        })
    }

    /// The bytes a cache of these dimensions reserves.
    pub fn reserved_bytes(
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        key_dim: usize,
        value_dim: usize,
        dtype: DType,
    ) -> usize {
        layers * capacity * kv_heads * (key_dim + value_dim) * dtype.block_bytes()
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

    /// The storage dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
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
    /// `len..len+T` (converted to the cache dtype). The caller advances `len` with
    /// [`KvCache::advance`] once every layer is written.
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

    /// Counts `t` newly written positions.
    pub fn advance(&mut self, t: usize) {
        self.len = (self.len + t).min(self.capacity);
    }
}
