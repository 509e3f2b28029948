//! `ReferenceBackend`: slow, plain, obviously correct scalar kernels for every op. It is
//! the executable specification the CPU and GPU backends are tested against: every value
//! is computed in f64 from the exact (dequantized) inputs, in the most direct loop.

mod copy;
mod elementwise;
mod experts;
mod gradients;
mod host_access;
mod linalg;
mod nn;
mod reduction;
mod routing;

use tempra_pool::{HostPool, PoolStats};

use crate::attention::AttentionParams;
use crate::backend::Backend;
use crate::error::{Result, TensorError};
use crate::op_kinds::{BinaryOp, ReduceOp, UnaryOp};
use crate::rope::RopeConfig;
use crate::storage::Storage;
use crate::tensor::Tensor;

/// The scalar reference backend over a host pool.
#[derive(Debug, Clone)]
pub struct ReferenceBackend {
    pool: HostPool,
}

impl ReferenceBackend {
    /// A reference backend whose outputs come from `pool`.
    pub fn new(pool: HostPool) -> Self {
        Self { pool }
    }

    /// The pool outputs come from.
    pub fn pool(&self) -> &HostPool {
        &self.pool
    }
}

impl Backend for ReferenceBackend {
    fn name(&self) -> &'static str {
        "reference"
    }

    fn allocate(&self, bytes: usize) -> Result<Storage> {
        let lease = self
            .pool
            .acquire(bytes)
            .map_err(|source| TensorError::Pool {
                op: "allocate",
                source,
            })?;
        Ok(Storage::Pooled(lease))
    }

    fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    fn upload(&self, src: &[u8], out: &mut Tensor) -> Result<()> {
        copy::upload(src, out)
    }

    fn fill(&self, out: &mut Tensor, value: f64) -> Result<()> {
        copy::fill(out, value)
    }

    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        copy::copy(src, dst)
    }

    fn quantize(&self, src: &Tensor, out: &mut Tensor) -> Result<()> {
        copy::quantize(src, out)
    }

    fn unary(&self, op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<()> {
        elementwise::unary(op, x, out)
    }

    fn binary(&self, op: BinaryOp, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<()> {
        elementwise::binary(op, lhs, rhs, out)
    }

    fn binary_inplace(&self, op: BinaryOp, lhs_out: &mut Tensor, rhs: &Tensor) -> Result<()> {
        elementwise::binary_inplace(op, lhs_out, rhs)
    }

    fn binary_scalar(&self, op: BinaryOp, x: &Tensor, scalar: f64, out: &mut Tensor) -> Result<()> {
        elementwise::binary_scalar(op, x, scalar, out)
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
        reduction::reduce(op, x, dim, out)
    }

    fn argmax(&self, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
        reduction::argmax(x, dim, out)
    }

    fn softmax(&self, x: &Tensor, log: bool, out: &mut Tensor) -> Result<()> {
        reduction::softmax(x, log, out)
    }

    fn matmul(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
        linalg::matmul(a, b, out)
    }

    fn linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        linalg::linear(x, w, bias, out)
    }

    fn expert_linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        experts::expert_linear(x, w, ids, bias, out)
    }

    fn top_k(&self, x: &Tensor, values: &mut Tensor, indices: &mut Tensor) -> Result<()> {
        routing::top_k(x, values, indices)
    }

    fn gather(&self, x: &Tensor, indices: &Tensor, out: &mut Tensor) -> Result<()> {
        routing::gather(x, indices, out)
    }

    fn weighted_sum(&self, x: &Tensor, weights: &Tensor, out: &mut Tensor) -> Result<()> {
        routing::weighted_sum(x, weights, out)
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f64, out: &mut Tensor) -> Result<()> {
        nn::rms_norm(x, w, eps, out)
    }

    fn layer_norm(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
        out: &mut Tensor,
    ) -> Result<()> {
        nn::layer_norm(x, w, b, eps, out)
    }

    fn rope(
        &self,
        x: &Tensor,
        positions: &Tensor,
        config: &RopeConfig,
        freq_factors: Option<&Tensor>,
        inverse: bool,
        out: &mut Tensor,
    ) -> Result<()> {
        nn::rope(x, positions, config, freq_factors, inverse, out)
    }

    fn embedding(&self, table: &Tensor, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        nn::embedding(table, ids, out)
    }

    fn embedding_backward(&self, ids: &Tensor, grad: &Tensor, out: &mut Tensor) -> Result<()> {
        gradients::embedding_backward(ids, grad, out)
    }

    fn one_hot(&self, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        gradients::one_hot(ids, out)
    }

    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        out: &mut Tensor,
    ) -> Result<()> {
        gradients::cross_entropy(logits, targets, ignore_index, out)
    }

    fn cross_entropy_backward(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        grad: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        gradients::cross_entropy_backward(logits, targets, ignore_index, grad, out)
    }

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
    ) -> Result<()> {
        gradients::attention_backward(q, k, v, params, grad, dq, dk, dv)
    }

    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        sinks: Option<&Tensor>,
        params: &AttentionParams,
        out: &mut Tensor,
    ) -> Result<()> {
        nn::attention(q, k, v, sinks, params, out)
    }
}
