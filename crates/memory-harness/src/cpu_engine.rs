//! `CpuEngine`: the CPU inference engine assembled from its public parts (a pool the
//! harness holds, the CPU backend, the weights, a step arena and `forward_in`), so that
//! the scenarios can read and reset the pool's counters and `close()` it. A step is
//! exactly what `Session::step` runs: `forward_in` under `no_grad` with the executor's
//! step arena and the session's KV cache.

use std::cell::RefCell;
use std::sync::Arc;

use anyhow::Result;
use tempra_autograd::{Autograd, no_grad};
use tempra_backend_cpu::CpuBackend;
use tempra_llm::ModelFile;
use tempra_llm::engine::{
    ArenaCapacity, ArenaStats, KvCache, KvTypes, LogitRows, ModelWeights, StepArena, forward_in,
    logits_slice,
};
use tempra_llm::model_config::ModelConfig;
use tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext};

/// A model ready to run on the CPU backend over a pool the caller can inspect.
#[derive(Debug)]
pub struct CpuEngine {
    /// The pool every transient comes from.
    pub pool: HostPool,
    /// The autograd handle over the CPU backend.
    pub ag: Autograd,
    /// The hyperparameters.
    pub config: ModelConfig,
    /// The weights (zero-copy views of the file mapping).
    pub weights: ModelWeights,
    /// The step arena every step writes its intermediates into.
    arena: RefCell<StepArena>,
}

impl CpuEngine {
    /// An engine over `file` with its own pool and a worker pool of `threads` threads.
    pub fn new(file: &ModelFile, threads: usize) -> Result<Self> {
        let config = ModelConfig::from_metadata(file.metadata())?;
        let weights = ModelWeights::from_file(file, &config)?;
        let pool = HostPool::host();
        let backend = CpuBackend::with_threads(pool.clone(), threads);
        let ctx = ExecContext::new(Arc::new(backend));
        let capacity = ArenaCapacity::for_context(config.context_length);
        let arena = StepArena::new(&ctx, "harness", &config, capacity)?;
        Ok(Self {
            pool,
            ag: Autograd::new(ctx),
            config,
            weights,
            arena: RefCell::new(arena),
        })
    }

    /// What the step arena did so far.
    pub fn arena_stats(&self) -> ArenaStats {
        self.arena.borrow().stats()
    }

    /// A KV cache of `context` positions (f16, as sessions use by default).
    pub fn kv_cache(&self, context: usize) -> Result<KvCache> {
        let c = &self.config;
        Ok(KvCache::new(
            self.ag.ctx(),
            c.block_count,
            context,
            c.head_count_kv,
            c.key_length,
            c.value_length,
            KvTypes::same(DType::F16),
        )?)
    }

    /// The bytes a KV cache of `context` positions reserves.
    pub fn kv_cache_bytes(&self, context: usize) -> usize {
        let c = &self.config;
        KvCache::reserved_bytes(
            c.block_count,
            context,
            c.head_count_kv,
            c.key_length,
            c.value_length,
            KvTypes::same(DType::F16),
        )
    }

    /// Runs `tokens` after what `cache` holds and returns the greedy next token; the
    /// logits view is dropped before this returns.
    pub fn run(&self, cache: &mut KvCache, tokens: &[u32]) -> Result<u32> {
        let _guard = no_grad();
        let mut arena = self.arena.borrow_mut();
        let logits = forward_in(
            &mut arena,
            &self.ag,
            &self.config,
            &self.weights,
            tokens,
            Some(cache),
            LogitRows::Last,
        )?
        .into_tensor();
        Ok(argmax(logits_slice(&logits)?))
    }
}

/// The index of the largest value (the first on ties; 0 for an empty slice).
fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::argmax;

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[0.5, 2.0, -1.0, 2.0]), 1);
        assert_eq!(argmax(&[]), 0);
    }
}
