//! `CpuBackend`: the `Backend` implementation. Ops not yet specialised delegate to the
//! reference kernels (marked `// delegated`); every delegation goes through
//! [`CpuBackend::delegated`] and is counted in [`Backend::handoffs`].

use std::sync::Arc;

use tempra_pool::{HostPool, PoolStats};
use tempra_tensor::{
    AttentionParams, Backend, BinaryOp, HandoffCounter, Handoffs, ReduceOp, ReferenceBackend,
    Result, RopeConfig, Storage, Tensor, TensorError, UnaryOp,
};

use crate::config::CpuConfig;
use crate::interleaved::InterleavedWeight;
use crate::isa::{Isa, Level};
use crate::ops::{self, Exec};
use crate::workers::WorkerPool;

/// The CPU backend over a host pool: SIMD kernels for the detected ISA, run on a worker
/// pool. Cheap to clone (clones share the workers).
#[derive(Debug, Clone)]
pub struct CpuBackend {
    pool: HostPool,
    reference: Arc<ReferenceBackend>,
    handoffs: Arc<HandoffCounter>,
    level: Level,
    workers: Arc<WorkerPool>,
    fast_prefill: bool,
}

impl CpuBackend {
    /// A CPU backend whose outputs come from `pool`, using the detected ISA
    /// ([`Isa::detect`]: the best one this CPU has, capped by `TEMPRA_CPU_ISA`) and the
    /// process-wide worker pool ([`WorkerPool::global`], one thread per physical core or
    /// `TEMPRA_CPU_THREADS`).
    pub fn new(pool: HostPool) -> Self {
        let level = Level::new(Isa::detect()).unwrap_or(Level::scalar());
        Self::assemble(pool, level, WorkerPool::global(), false)
    }

    /// [`CpuBackend::new`] with its own worker pool of `threads` threads (the calling
    /// thread included; 1 runs everything on the caller).
    pub fn with_threads(pool: HostPool, threads: usize) -> Self {
        let level = Level::new(Isa::detect()).unwrap_or(Level::scalar());
        Self::assemble(pool, level, Arc::new(WorkerPool::new(threads)), false)
    }

    /// A backend with an explicit ISA and thread count (see [`CpuConfig`]); an error when
    /// this CPU lacks the ISA.
    pub fn with_config(pool: HostPool, config: CpuConfig) -> Result<Self> {
        let isa = config.isa.unwrap_or_else(Isa::detect);
        let level = Level::new(isa).ok_or_else(|| TensorError::Unsupported {
            op: "CpuBackend::with_config",
            backend: "cpu",
            what: format!("the {isa} kernels: this CPU lacks their features"),
        })?;
        let workers = match config.threads {
            Some(n) => Arc::new(WorkerPool::new(n)),
            None => WorkerPool::global(),
        };
        Ok(Self::assemble(pool, level, workers, config.fast_prefill))
    }

    fn assemble(
        pool: HostPool,
        level: Level,
        workers: Arc<WorkerPool>,
        fast_prefill: bool,
    ) -> Self {
        Self {
            reference: Arc::new(ReferenceBackend::new(pool.clone())),
            handoffs: Arc::new(HandoffCounter::new()),
            pool,
            level,
            workers,
            fast_prefill,
        }
    }

    /// Whether prefill may take arithmetic faster than decode's ([`CpuConfig::fast_prefill`]).
    pub fn fast_prefill(&self) -> bool {
        self.fast_prefill
    }

    /// The pool outputs come from.
    pub fn pool(&self) -> &HostPool {
        &self.pool
    }

    /// The ISA the kernels run.
    pub fn isa(&self) -> Isa {
        self.level.isa()
    }

    /// The checked ISA level, for kernels that dispatch on it.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The worker pool kernels run on.
    pub fn workers(&self) -> &Arc<WorkerPool> {
        &self.workers
    }

    /// Threads a kernel may use (the caller included).
    pub fn threads(&self) -> usize {
        self.workers.threads()
    }

    /// The reference backend, for a call of `op` this backend hands to it (counted).
    fn delegated(&self, op: &'static str) -> &ReferenceBackend {
        self.handoffs.count(op);
        &self.reference
    }

    /// What the op kernels need, gathered per call.
    fn exec(&self) -> Exec<'_> {
        Exec {
            level: self.level,
            workers: &self.workers,
            pool: &self.pool,
            fast_prefill: self.fast_prefill,
        }
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
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

    fn handoffs(&self) -> Handoffs {
        self.handoffs.snapshot()
    }

    fn upload(&self, src: &[u8], out: &mut Tensor) -> Result<()> {
        ops::copy::upload(&self.exec(), src, out)?
            .or_else(|| self.delegated("upload").upload(src, out))
    }

    fn fill(&self, out: &mut Tensor, value: f64) -> Result<()> {
        ops::copy::fill(&self.exec(), out, value)?
            .or_else(|| self.delegated("fill").fill(out, value))
    }

    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        ops::copy::copy(&self.exec(), src, dst)?.or_else(|| self.delegated("copy").copy(src, dst))
    }

    fn quantize(&self, src: &Tensor, out: &mut Tensor) -> Result<()> {
        self.delegated("quantize").quantize(src, out) // delegated
    }

    fn unary(&self, op: UnaryOp, x: &Tensor, out: &mut Tensor) -> Result<()> {
        ops::elementwise::unary(&self.exec(), op, x, out)?
            .or_else(|| self.delegated("unary").unary(op, x, out))
    }

    fn binary(&self, op: BinaryOp, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<()> {
        ops::elementwise::binary(&self.exec(), op, lhs, rhs, out)?
            .or_else(|| self.delegated("binary").binary(op, lhs, rhs, out))
    }

    fn binary_inplace(&self, op: BinaryOp, lhs_out: &mut Tensor, rhs: &Tensor) -> Result<()> {
        ops::elementwise::binary_inplace(&self.exec(), op, lhs_out, rhs)?.or_else(|| {
            self.delegated("binary_inplace")
                .binary_inplace(op, lhs_out, rhs)
        })
    }

    fn binary_scalar(&self, op: BinaryOp, x: &Tensor, scalar: f64, out: &mut Tensor) -> Result<()> {
        ops::elementwise::binary_scalar(&self.exec(), op, x, scalar, out)?.or_else(|| {
            self.delegated("binary_scalar")
                .binary_scalar(op, x, scalar, out)
        })
    }

    fn reduce(&self, op: ReduceOp, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
        ops::reduce::reduce(&self.exec(), op, x, dim, out)?
            .or_else(|| self.delegated("reduce").reduce(op, x, dim, out))
    }

    fn argmax(&self, x: &Tensor, dim: usize, out: &mut Tensor) -> Result<()> {
        ops::reduce::argmax(&self.exec(), x, dim, out)?
            .or_else(|| self.delegated("argmax").argmax(x, dim, out))
    }

    fn softmax(&self, x: &Tensor, log: bool, out: &mut Tensor) -> Result<()> {
        ops::softmax::softmax(&self.exec(), x, log, out)?
            .or_else(|| self.delegated("softmax").softmax(x, log, out))
    }

    fn matmul(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
        if out.dtype() == tempra_tensor::DType::F64 {
            return self.delegated("matmul").matmul(a, b, out); // delegated: f64 is for gradient checks
        }
        crate::matmul::matmul(&self.products().gemm, a, b, out)
    }

    fn linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        if out.dtype() == tempra_tensor::DType::F64 {
            return self.delegated("linear").linear(x, w, bias, out); // delegated: f64 is for gradient checks
        }
        if w.storage().prepared().is_some() && InterleavedWeight::of(w).is_none() {
            // delegated: another backend's prepared weight (the reference reads it
            // converted back to its dtype's layout)
            return self.delegated("linear").linear(x, w, bias, out);
        }
        crate::linear::linear(&self.products(), x, w, bias, out)
    }

    fn prepare_weight(&self, w: &Tensor) -> Result<Option<Tensor>> {
        crate::prepare::prepare_weight(&self.products(), w)
    }

    fn expert_linear(
        &self,
        x: &Tensor,
        w: &Tensor,
        ids: &Tensor,
        bias: Option<&Tensor>,
        out: &mut Tensor,
    ) -> Result<()> {
        let foreign = w.storage().prepared().is_some() && InterleavedWeight::of(w).is_none();
        if out.dtype() == tempra_tensor::DType::F64 || foreign {
            // delegated: f64 is for gradient checks; another backend's prepared weight
            // is read converted back by the reference
            return self
                .delegated("expert_linear")
                .expert_linear(x, w, ids, bias, out);
        }
        crate::experts::expert_linear(&self.products(), x, w, ids, bias, out)?.or_else(|| {
            self.delegated("expert_linear")
                .expert_linear(x, w, ids, bias, out)
        })
    }

    fn top_k(&self, x: &Tensor, values: &mut Tensor, indices: &mut Tensor) -> Result<()> {
        ops::routing::top_k(&self.exec(), x, values, indices)?
            .or_else(|| self.delegated("top_k").top_k(x, values, indices))
    }

    fn gather(&self, x: &Tensor, indices: &Tensor, out: &mut Tensor) -> Result<()> {
        ops::routing::gather(&self.exec(), x, indices, out)?
            .or_else(|| self.delegated("gather").gather(x, indices, out))
    }

    fn weighted_sum(&self, x: &Tensor, weights: &Tensor, out: &mut Tensor) -> Result<()> {
        ops::routing::weighted_sum(&self.exec(), x, weights, out)?
            .or_else(|| self.delegated("weighted_sum").weighted_sum(x, weights, out))
    }

    fn rms_norm(&self, x: &Tensor, w: &Tensor, eps: f64, out: &mut Tensor) -> Result<()> {
        ops::norm::rms_norm(&self.exec(), x, w, eps, out)?
            .or_else(|| self.delegated("rms_norm").rms_norm(x, w, eps, out))
    }

    fn layer_norm(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        eps: f64,
        out: &mut Tensor,
    ) -> Result<()> {
        ops::norm::layer_norm(&self.exec(), x, w, b, eps, out)?
            .or_else(|| self.delegated("layer_norm").layer_norm(x, w, b, eps, out))
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
        ops::rope::rope(
            &self.exec(),
            x,
            positions,
            config,
            freq_factors,
            inverse,
            out,
        )?
        .or_else(|| {
            self.delegated("rope")
                .rope(x, positions, config, freq_factors, inverse, out)
        })
    }

    fn embedding(&self, table: &Tensor, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        ops::embedding::embedding(&self.exec(), table, ids, out)?
            .or_else(|| self.delegated("embedding").embedding(table, ids, out))
    }

    fn embedding_backward(&self, ids: &Tensor, grad: &Tensor, out: &mut Tensor) -> Result<()> {
        self.delegated("embedding_backward")
            .embedding_backward(ids, grad, out) // delegated
    }

    fn one_hot(&self, ids: &Tensor, out: &mut Tensor) -> Result<()> {
        self.delegated("one_hot").one_hot(ids, out) // delegated
    }

    fn cross_entropy(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        out: &mut Tensor,
    ) -> Result<()> {
        ops::cross_entropy::cross_entropy(&self.exec(), logits, targets, ignore_index, out)?
            .or_else(|| {
                self.delegated("cross_entropy")
                    .cross_entropy(logits, targets, ignore_index, out)
            })
    }

    fn cross_entropy_backward(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        ignore_index: Option<u32>,
        grad: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        ops::cross_entropy::cross_entropy_backward(
            &self.exec(),
            logits,
            targets,
            ignore_index,
            grad,
            out,
        )?
        .or_else(|| {
            self.delegated("cross_entropy_backward")
                .cross_entropy_backward(logits, targets, ignore_index, grad, out)
        })
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
        ops::attention_backward::attention_backward(
            &self.exec(),
            q,
            k,
            v,
            params,
            grad,
            dq,
            dk,
            dv,
        )?
        .or_else(|| {
            self.delegated("attention_backward")
                .attention_backward(q, k, v, params, grad, dq, dk, dv)
        })
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
        ops::attention::attention(&self.exec(), q, k, v, sinks, params, out)?.or_else(|| {
            self.delegated("attention")
                .attention(q, k, v, sinks, params, out)
        })
    }
}
