//! The exec/backend seam: the `Backend` trait every backend implements.
//!
//! The [`crate::ExecContext`] validates each op (shapes, dtypes, ranges), takes the output
//! from the backend's pool through [`Backend::allocate`] (or checks the caller's, for the
//! `*_into` variants), and calls one of these kernels with the inputs and a mutable
//! output. Kernels never allocate outputs and may assume the context's checks hold.
//!
//! The output rule: an output is an exclusive region of a buffer. It is contiguous, of
//! the documented shape and dtype, in writable storage; a host buffer is held by the
//! output tensor alone (CPU kernels write through it); and no input views the output's
//! buffer (a GPU dispatch may not bind one buffer for reading and writing). A device
//! output may be a region of a buffer other views share (a step arena's slot); the
//! in-place `binary_inplace` reads and writes its `lhs_out` only. Inputs have the
//! documented dtypes and broadcast shapes and may be strided (transposed and broadcast
//! views are passed without copies).

use std::fmt::Debug;

use tempra_pool::PoolStats;

use crate::attention::AttentionParams;
use crate::error::Result;
use crate::handoff::Handoffs;
use crate::op_kinds::{BinaryOp, ReduceOp, UnaryOp};
use crate::rope::RopeConfig;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// A set of kernels plus the memory their outputs come from.
pub trait Backend: Send + Sync + Debug {
    /// The backend's name (`"reference"`, `"cpu"`, `"wgpu"`).
    fn name(&self) -> &'static str;

    /// Storage of at least `bytes` bytes from this backend's pool. Its content is
    /// unspecified (a recycled block): kernels write every output element.
    fn allocate(&self, bytes: usize) -> Result<Storage>;

    /// Zeroed storage of at least `bytes` bytes that never enters the transient pool:
    /// session-lifetime state (parameters, optimizer moments, caches). Host backends keep
    /// this default (an owned, aligned host block); device backends override it to make
    /// device memory outside their pool.
    fn allocate_persistent(&self, bytes: usize) -> Result<Storage> {
        Storage::owned_zeroed(bytes)
    }

    /// The counters of the pool outputs come from.
    fn pool_stats(&self) -> PoolStats;

    /// The calls this backend handed to another implementation so far, per op (the CPU
    /// backend's delegations to the reference kernels, a device backend's host
    /// fallbacks). A backend that runs every op itself keeps this default (none).
    fn handoffs(&self) -> Handoffs {
        Handoffs::new()
    }

    /// Copies host bytes into `out` (contiguous, `src.len()` == its byte size).
    fn upload(&self, src: &[u8], out: &mut Tensor) -> Result<()>;

    /// Sets every element of `out` to `value` (converted to its dtype).
    fn fill(&self, out: &mut Tensor, value: f64) -> Result<()>;

    /// Copies `src` (any layout) element by element into `dst`'s layout, converting plain
    /// dtypes. `dst` may be a strided region of a uniquely held storage (concat, KV cache
    /// writes); block dtypes must match and be copied whole blocks at a time.
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()>;

    /// Quantizes f32 `src` (contiguous rows) into block dtype `out`.
    fn quantize(&self, src: &Tensor, out: &mut Tensor) -> Result<()>;

    /// `out = op(x)`; `x` and `out` share the float dtype (F32 or F64).
    fn unary(&self, op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<()>;

    /// `out = op(lhs, rhs)`; both inputs are already broadcast to `out`'s shape (stride-0
    /// views) and share its float dtype.
    fn binary(&self, op: BinaryOp, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<()>;

    /// `lhs_out = op(lhs_out, rhs)` in place; `lhs_out` is contiguous and uniquely held,
    /// `rhs` is broadcast to its shape.
    fn binary_inplace(&self, op: BinaryOp, lhs_out: &mut Tensor, rhs: &Tensor) -> Result<()>;

    /// `out = op(x, scalar)`.
    fn binary_scalar(&self, op: BinaryOp, x: &Tensor, scalar: f64, out: &mut Tensor) -> Result<()>;

    /// Reduces `x` along `dim` into `out`, whose shape is `x`'s with `dim` set to 1.
    fn reduce(&self, op: ReduceOp, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()>;

    /// The index of the maximum along `dim` (first one on ties) into U32 `out`, shaped as
    /// `x` with `dim` set to 1.
    fn argmax(&self, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()>;

    /// Softmax (or log-softmax when `log`) along the last dim.
    fn softmax(&self, x: &Tensor, log: bool, out: &mut Tensor) -> Result<()>;

    /// Batched matrix product: `a [.., M, K] · b [.., K, N] → out [.., M, N]`; batch dims
    /// already broadcast to `out`'s. Inputs F32/F16/BF16 (any mix) give F32; F64 inputs
    /// give F64.
    fn matmul(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()>;

    /// `out [.., N] = x [.., K] · wᵀ (+ bias)` with `w [N, K]` of any float or block dtype
    /// (block formats laid out as GGUF stores them: N rows of K values); `x` is F32 (or
    /// F64 with an F64 weight), `bias` is `[N]` of `out`'s dtype.
    fn linear(&self, x: &Tensor, w: &Tensor, bias: Option<&Tensor>, out: &mut Tensor)
    -> Result<()>;

    /// A copy of the weight `w [N, K]` (or a stack of expert weights `[E, N, K]`) in a
    /// layout or memory this backend's `linear` (`expert_linear`) reads faster, or `None`
    /// to keep `w` as it is: the same bytes on huge pages, or a layout of the backend's
    /// own in a [`Storage::Prepared`](crate::Storage::Prepared) (the CPU's rows
    /// interleaved by eight for the decode GEMV, each expert's rows apart), the dtype
    /// still `w`'s. Called once at load for weights that only ever meet `linear` or
    /// `expert_linear`; the copy is persistent memory, not a pool lease. The default
    /// keeps every weight.
    fn prepare_weight(&self, w: &Tensor) -> Result<Option<Tensor>> {
        let _ = w;
        Ok(None)
    }

    /// The grouped-expert product (ggml's `mul_mat_id`): `out [T, k, N]` row `(t, s)` is
    /// `x[t, s] · w[ids[t, s]]ᵀ (+ bias[ids[t, s]])` for the stacked weights
    /// `w [E, N, K]` (any float or block dtype, each expert's `[N, K]` laid out as
    /// `linear`'s weight), `x [T, k, K]` F32 (F64 with an F64 weight; dim 1 may be a
    /// stride-0 broadcast of one row per token), U32 `ids [T, k]` and `bias [E, N]` of
    /// `out`'s dtype. Every id is below `E` when `ids` is host memory (the context checks);
    /// a kernel reading device ids must still never read out of bounds.
    fn expert_linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()>;

    /// The `k` largest values along the last dim of `x [.., N]` (F32 or F64) in descending
    /// order into `values [.., k]` (x's dtype) and their positions into U32
    /// `indices [.., k]`, in the order of [`crate::ordering::ranks_above`]: NaN above
    /// every number, equal values (and NaNs) by the lower index first.
    fn top_k(&self, x: &Tensor, values: &mut Tensor, indices: &mut Tensor) -> Result<()>;

    /// `out [.., k] = x [.., N]` at U32 `indices [.., k]` along the last dim (torch's
    /// `gather(x, -1, indices)`); x and out share a float dtype. Every index is below `N`
    /// when `indices` is host memory (the context checks).
    fn gather(&self, x: &Tensor, indices: &Tensor, out: &mut Tensor) -> Result<()>;

    /// `out [.., D] = Σ_s weights[.., s] · x[.., s, :]` over `x [.., k, D]` and
    /// `weights [.., k]` (one float dtype), summed in slot order `s = 0, 1, …, k − 1`, so
    /// a row's sum does not depend on the rows computed beside it.
    fn weighted_sum(&self, x: &Tensor, weights: &Tensor, out: &mut Tensor) -> Result<()>;

    /// RMS norm over the last dim: `x / √(mean(x²) + eps) · w`.
    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f64, out: &mut Tensor) -> Result<()>;

    /// Layer norm over the last dim: `(x - mean) / √(var + eps) · w (+ b)`.
    fn layer_norm(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
        out: &mut Tensor,
    ) -> Result<()>;

    /// Rotary embedding of `x [.., T, H, D]` at U32 `positions [T]`; `freq_factors`
    /// (F32 `[rotary_dims/2]`, GGUF `rope_freqs`) divides each pair's frequency. With
    /// `inverse` the rotation runs backwards (angle −θ): the gradient of rope.
    fn rope(
        &self,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
        inverse: bool,
        out: &mut Tensor,
    ) -> Result<()>;

    /// Rows of `table [V, D]` (any float or block dtype) picked by U32 `ids [..]` into
    /// `out [.., D]` (F32, or F64 for an F64 table).
    fn embedding(&self, table: &Tensor, ids: &Tensor, out: &mut Tensor) -> Result<()>;

    /// The gradient of `embedding` w.r.t. the table: `out [V, D]` (zeroed by the kernel)
    /// accumulates row `grad[p]` into row `ids[p]` for every position `p`.
    fn embedding_backward(&self, ids: &Tensor, grad: &Tensor, out: &mut Tensor) -> Result<()>;

    /// `out [.., depth]` = 1 where the last index equals U32 `ids [..]`, else 0.
    fn one_hot(&self, ids: &Tensor, out: &mut Tensor) -> Result<()>;

    /// Per-row cross-entropy of `logits [.., V]` against U32 `targets [..]`:
    /// `out[r] = logsumexp(logits[r]) − logits[r, targets[r]]`, 0 where the target equals
    /// `ignore_index`.
    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        out: &mut Tensor,
    ) -> Result<()>;

    /// The gradient of [`Backend::cross_entropy`]: `out [.., V] = (softmax(logits) −
    /// onehot(targets)) · grad[r]`, zero rows where the target is ignored.
    fn cross_entropy_backward(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        grad: &Tensor,
        out: &mut Tensor,
    ) -> Result<()>;

    /// Causal attention: `q [.., Tq, Hq, D]` (F32/F64), `k [.., Tk, Hkv, D]` and
    /// `v [.., Tk, Hkv, Dv]` (F32, F16 or a 32-value block format of
    /// [`crate::context::KV_DTYPES`] with F32 queries; F64 with F64 ones) into
    /// `out [.., Tq, Hq, Dv]` of q's dtype. `sinks [Hq]` (F32 or q's dtype), when given,
    /// adds per query head one logit to every row's softmax that carries no value
    /// (attention sinks, see [`crate::ExecContext::attention_with_sinks`]).
    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
        out: &mut Tensor,
    ) -> Result<()>;

    /// The gradients of [`Backend::attention`] given `grad [.., Tq, Hq, Dv]`: `dq` (q's
    /// shape), `dk` and `dv` (k's and v's shapes), all of q's dtype; the kernel zeroes and
    /// fills them.
    fn attention_backward(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        params: &AttentionParams,
        grad: &Tensor,
        dq: &mut Tensor,
        dk: &mut Tensor,
        dv: &mut Tensor,
    ) -> Result<()>;
}
