//! `BufferArena`: every intermediate of one transformer forward pass, plus the KV cache,
//! allocated once in device memory from an [`ArenaShape`] and reused by every step.
//!
//! An engine runs a step by binding views (`narrow` to the step's rows, `reshape` to
//! heads) of these buffers as kernel outputs, so a step allocates no device memory.
//! [`BufferArena::release`] frees everything through an exhaustive destructuring of
//! [`ArenaBuffers`]: a field added without being freed is a compile error.

use std::fmt;
use std::sync::Arc;

use tempra_tensor::{Layout, Shape, Storage, Tensor, TensorError};

use crate::arena_shape::{ArenaCapacity, ArenaShape, BufferRole, BufferSpec};
use crate::backend::GpuBackend;
use crate::error::{GpuError, Result};
use crate::memory::DeviceBlock;
use crate::operand::gpu_storage;
use crate::storage::{DeviceBuffer, GpuStorage};

const OP: &str = "BufferArena";

/// The buffers of a [`BufferArena`], as contiguous device tensors (shapes in
/// [`ArenaShape::buffer_specs`]). `T` rows are `max_batch_tokens`, `R` rows
/// `max_logit_rows`, `S` rows `max_seq_len`.
///
/// Views of them (`narrow`, `reshape`) share the buffer; a view still alive when the
/// arena is released keeps its buffer until it drops (the release report counts them).
#[derive(Debug)]
pub struct ArenaBuffers {
    /// The step's token ids `[T]` (u32).
    pub token_ids: Tensor,
    /// The step's absolute positions `[T]` (u32).
    pub positions: Tensor,
    /// The residual stream `[T, D]`; each block's output is added to it in place.
    pub hidden: Tensor,
    /// Norm outputs `[T, D]`.
    pub norm: Tensor,
    /// Query projection `[T, Hq·Dk]`.
    pub q: Tensor,
    /// Queries after the q-norm or rope `[T, Hq·Dk]` (kernels do not run in place).
    pub q_scratch: Tensor,
    /// Key projection `[T, Hkv·Dk]`.
    pub k: Tensor,
    /// Keys after the k-norm or rope `[T, Hkv·Dk]`.
    pub k_scratch: Tensor,
    /// Value projection `[T, Hkv·Dv]`.
    pub v: Tensor,
    /// Attention output `[T, Hq·Dv]`.
    pub attention: Tensor,
    /// Attention output projection `[T, D]`.
    pub attn_out: Tensor,
    /// FFN gate projection `[T, F]`.
    pub ffn_gate: Tensor,
    /// FFN up projection `[T, F]`.
    pub ffn_up: Tensor,
    /// FFN activation times up `[T, F]`.
    pub ffn_act: Tensor,
    /// FFN down projection `[T, D]`.
    pub ffn_down: Tensor,
    /// Logits `[R, V]`.
    pub logits: Tensor,
    /// Logit scratch (soft-capping) `[R, V]`.
    pub logits_scratch: Tensor,
    /// Each layer's keys `[S, Hkv, Dk]` (the KV dtype).
    pub keys: Vec<Tensor>,
    /// Each layer's values `[S, Hkv, Dv]` (the KV dtype).
    pub values: Vec<Tensor>,
}

impl ArenaBuffers {
    /// Allocates every buffer of `specs` (from [`ArenaShape::buffer_specs`]).
    fn allocate(gpu: &GpuBackend, specs: &[BufferSpec], layers: usize) -> Result<Self> {
        let make = |name: &'static str, layer: Option<usize>| -> Result<Tensor> {
            let spec = specs
                .iter()
                .find(|s| s.name == name && s.layer == layer)
                .ok_or_else(|| GpuError::Device {
                    op: OP,
                    message: format!("no buffer spec for {name} {layer:?}"),
                })?;
            device_tensor(gpu, spec)
        };
        let per_layer = |name| {
            (0..layers)
                .map(|l| make(name, Some(l)))
                .collect::<Result<Vec<_>>>()
        };
        Ok(Self {
            token_ids: make("token_ids", None)?,
            positions: make("positions", None)?,
            hidden: make("hidden", None)?,
            norm: make("norm", None)?,
            q: make("q", None)?,
            q_scratch: make("q_scratch", None)?,
            k: make("k", None)?,
            k_scratch: make("k_scratch", None)?,
            v: make("v", None)?,
            attention: make("attention", None)?,
            attn_out: make("attn_out", None)?,
            ffn_gate: make("ffn_gate", None)?,
            ffn_up: make("ffn_up", None)?,
            ffn_act: make("ffn_act", None)?,
            ffn_down: make("ffn_down", None)?,
            logits: make("logits", None)?,
            logits_scratch: make("logits_scratch", None)?,
            keys: per_layer("keys")?,
            values: per_layer("values")?,
        })
    }

    /// Calls `f(name, layer, buffer)` for every buffer, in [`ArenaShape::buffer_specs`]
    /// order.
    pub fn for_each(&self, mut f: impl FnMut(&'static str, Option<usize>, &Tensor)) {
        // Exhaustive (no `..`): a new field must be visited here too.
        let ArenaBuffers {
            token_ids,
            positions,
            hidden,
            norm,
            q,
            q_scratch,
            k,
            k_scratch,
            v,
            attention,
            attn_out,
            ffn_gate,
            ffn_up,
            ffn_act,
            ffn_down,
            logits,
            logits_scratch,
            keys,
            values,
        } = self;
        for (name, t) in [
            ("token_ids", token_ids),
            ("positions", positions),
            ("hidden", hidden),
            ("norm", norm),
            ("q", q),
            ("q_scratch", q_scratch),
            ("k", k),
            ("k_scratch", k_scratch),
            ("v", v),
            ("attention", attention),
            ("attn_out", attn_out),
            ("ffn_gate", ffn_gate),
            ("ffn_up", ffn_up),
            ("ffn_act", ffn_act),
            ("ffn_down", ffn_down),
            ("logits", logits),
            ("logits_scratch", logits_scratch),
        ] {
            f(name, None, t);
        }
        for (l, (kt, vt)) in keys.iter().zip(values).enumerate() {
            f("keys", Some(l), kt);
            f("values", Some(l), vt);
        }
    }
}

/// A zeroed contiguous device tensor for `spec`, outside the device pool.
fn device_tensor(gpu: &GpuBackend, spec: &BufferSpec) -> Result<Tensor> {
    let ctx = &gpu.ctx;
    let bytes = spec.bytes();
    if bytes as u64 > ctx.rules.max_size {
        return Err(GpuError::TooLarge {
            op: OP,
            what: spec.name,
            bytes: bytes as u64,
            limit: ctx.rules.max_size,
        });
    }
    // wgpu zero-initializes new buffers.
    let block = ctx.arena_memory.make(bytes).map_err(|e| GpuError::Device {
        op: OP,
        message: format!("allocating {} ({bytes} bytes): {e}", spec.name),
    })?;
    let layout = Layout::contiguous(Shape::new(&spec.dims)?, spec.dtype)?;
    let storage = GpuStorage::new(DeviceBuffer::Owned(block), bytes, Arc::clone(ctx));
    Ok(Tensor::from_storage(
        Storage::Device(Box::new(storage)),
        layout,
    )?)
}

/// The device block behind an arena tensor.
fn block_of(t: &Tensor) -> Result<&DeviceBlock> {
    gpu_storage(t)
        .map(GpuStorage::block)
        .ok_or(GpuError::Tensor(TensorError::Device {
            op: OP,
            found: t.storage().location(),
            expected: crate::BACKEND_NAME,
        }))
}

/// What [`BufferArena::release`] freed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaReport {
    /// The arena's label.
    pub label: String,
    /// Buffers released by this call (0 when the arena was already released).
    pub buffers: usize,
    /// Bytes of those buffers.
    pub bytes: usize,
    /// Buffers that outside views still held when released (freed when those drop).
    pub still_viewed: usize,
}

impl fmt::Display for ArenaReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "arena `{}`: released {} buffers, {} bytes",
            self.label, self.buffers, self.bytes
        )?;
        if self.still_viewed > 0 {
            write!(
                f,
                " ({} still held by views, freed when they drop)",
                self.still_viewed
            )?;
        }
        Ok(())
    }
}

/// Every intermediate of a forward pass and the KV cache, in device memory, allocated
/// once from an [`ArenaShape`] and an [`ArenaCapacity`], reused by every step.
///
/// ```no_run
/// use tempra_backend_gpu::{ArenaCapacity, ArenaShape, BufferArena, GpuBackend};
/// use tempra_tensor::DType;
///
/// let gpu = GpuBackend::new()?;
/// let shape = ArenaShape { hidden: 64, heads: 4, kv_heads: 2, key_dim: 16, value_dim: 16,
///                          ffn: 172, vocab: 320, layers: 2, kv_dtype: DType::F16 };
/// let capacity = ArenaCapacity { max_batch_tokens: 8, max_logit_rows: 1, max_seq_len: 256 };
/// let mut arena = BufferArena::new(&gpu, "session 0", &shape, capacity)?;
/// let hidden = arena.buffers()?.hidden.narrow(0, 0, 3)?; // the rows of a 3-token step
/// drop(hidden);
/// eprintln!("{}", arena.release()); // arena `session 0`: released 21 buffers, ... bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct BufferArena {
    label: String,
    shape: ArenaShape,
    capacity: ArenaCapacity,
    gpu: GpuBackend,
    buffers: Option<ArenaBuffers>,
    bytes: usize,
    count: usize,
}

impl BufferArena {
    /// Allocates every buffer of [`ArenaShape::buffer_specs`] (zeroed) on `gpu`'s device,
    /// outside its pool. `label` names the arena in reports.
    ///
    /// Errors: an invalid shape ([`TensorError::Argument`] saying what), a buffer larger
    /// than one binding ([`GpuError::TooLarge`]: the kernels bind each whole), or the
    /// device running out of memory.
    pub fn new(
        gpu: &GpuBackend,
        label: impl Into<String>,
        shape: &ArenaShape,
        capacity: ArenaCapacity,
    ) -> Result<Self> {
        shape
            .validate(&capacity)
            .map_err(|reason| TensorError::Argument {
                op: OP,
                name: "shape",
                reason,
            })?;
        let specs = shape.buffer_specs(&capacity);
        let buffers = ArenaBuffers::allocate(gpu, &specs, shape.layers)?;
        Ok(Self {
            label: label.into(),
            shape: *shape,
            capacity,
            gpu: gpu.clone(),
            buffers: Some(buffers),
            bytes: specs.iter().map(BufferSpec::bytes).sum(),
            count: specs.len(),
        })
    }

    /// The label given at creation.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The shape the buffers are sized from.
    pub fn shape(&self) -> &ArenaShape {
        &self.shape
    }

    /// The capacity the buffers are sized for.
    pub fn capacity(&self) -> &ArenaCapacity {
        &self.capacity
    }

    /// Bytes of device memory held (0 once released).
    pub fn bytes(&self) -> usize {
        if self.buffers.is_some() {
            self.bytes
        } else {
            0
        }
    }

    /// Buffers held (0 once released).
    pub fn buffer_count(&self) -> usize {
        if self.buffers.is_some() {
            self.count
        } else {
            0
        }
    }

    /// Whether [`Self::release`] has run.
    pub fn is_released(&self) -> bool {
        self.buffers.is_none()
    }

    /// The buffers; an error once released.
    pub fn buffers(&self) -> Result<&ArenaBuffers> {
        self.buffers.as_ref().ok_or_else(|| {
            GpuError::Tensor(TensorError::Argument {
                op: OP,
                name: "arena",
                reason: format!("`{}` was released", self.label),
            })
        })
    }

    /// Zeroes the buffers that carry state between steps and requests: every layer's
    /// keys and values. (The per-step buffers are written before they are read.)
    pub fn zero_prefill_essentials(&self) -> Result<()> {
        self.zero_where(|role| role == BufferRole::KvCache, usize::MAX)
    }

    /// Zeroes the first `tokens` rows of the token-major buffers (and the first
    /// `min(tokens, max_logit_rows)` rows of the logits): what a step of `tokens` tokens
    /// reads. Errors when `tokens` exceeds `max_batch_tokens`.
    pub fn zero_all_rows(&self, tokens: usize) -> Result<()> {
        if tokens > self.capacity.max_batch_tokens {
            return Err(GpuError::Tensor(TensorError::Argument {
                op: OP,
                name: "tokens",
                reason: format!(
                    "{tokens} rows, the arena holds {}",
                    self.capacity.max_batch_tokens
                ),
            }));
        }
        self.zero_where(|role| role != BufferRole::KvCache, tokens)
    }

    /// Zeroes every buffer.
    pub fn zero_all(&self) -> Result<()> {
        self.zero_where(|_| true, usize::MAX)
    }

    /// Records clears of the first `rows` rows of every buffer whose role `pick` accepts.
    fn zero_where(&self, pick: impl Fn(BufferRole) -> bool, rows: usize) -> Result<()> {
        let buffers = self.buffers()?;
        let specs = self.shape.buffer_specs(&self.capacity);
        let mut result = Ok(());
        let mut index = 0;
        buffers.for_each(|_, _, t| {
            let spec = &specs[index];
            index += 1;
            if result.is_err() || !pick(spec.role) {
                return;
            }
            result = block_of(t).and_then(|block| {
                let len = (spec.row_bytes() * rows.min(spec.dims[0])).next_multiple_of(4);
                let len = len.min(block.size()) as u64;
                self.gpu.ctx.record_clear(block, 0, len)
            });
        });
        result
    }

    /// Frees every buffer (after submitting the work recorded so far) and reports what
    /// was freed. Idempotent: a second call frees nothing and reports 0 buffers. Runs on
    /// drop when not called.
    pub fn release(&mut self) -> ArenaReport {
        let mut report = ArenaReport {
            label: self.label.clone(),
            buffers: 0,
            bytes: 0,
            still_viewed: 0,
        };
        let Some(buffers) = self.buffers.take() else {
            return report;
        };
        // Work recorded against the buffers goes to the GPU first (wgpu keeps a buffer
        // alive until submitted work using it completes). A device error here is reported
        // by the backend's next operation; the buffers are freed either way.
        let _ = self.gpu.flush();
        // Exhaustive (no `..`): a field added to `ArenaBuffers` without being freed here
        // does not compile.
        let ArenaBuffers {
            token_ids,
            positions,
            hidden,
            norm,
            q,
            q_scratch,
            k,
            k_scratch,
            v,
            attention,
            attn_out,
            ffn_gate,
            ffn_up,
            ffn_act,
            ffn_down,
            logits,
            logits_scratch,
            keys,
            values,
        } = buffers;
        let singles = [
            token_ids,
            positions,
            hidden,
            norm,
            q,
            q_scratch,
            k,
            k_scratch,
            v,
            attention,
            attn_out,
            ffn_gate,
            ffn_up,
            ffn_act,
            ffn_down,
            logits,
            logits_scratch,
        ];
        for t in singles.into_iter().chain(keys).chain(values) {
            report.buffers += 1;
            report.bytes += t.storage().byte_len();
            if t.storage_refs() > 1 {
                report.still_viewed += 1;
            }
            drop(t);
        }
        report
    }
}

impl Drop for BufferArena {
    fn drop(&mut self) {
        let report = self.release();
        if report.still_viewed > 0 {
            eprintln!("tempra-backend-gpu: {report}");
        }
    }
}
