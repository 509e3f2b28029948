//! A training step of a tiny transformer (the LLM forward over variable weights, cross
//! entropy, backward, AdamW) after the first steps: no pool miss, no large heap
//! allocation, a flat live heap, allocations per op reported.

use std::sync::Arc;

use anyhow::Result;
use tempra_autograd::optim::{AdamW, AdamWConfig, Optimizer};
use tempra_autograd::{Autograd, GradStore, ParamId, ParamStore};
use tempra_backend_cpu::CpuBackend;
use tempra_llm::engine::{LogitRows, ModelWeights, forward};
use tempra_llm::model_config::ModelConfig;
use tempra_llm::{LlmError, ModelFile};
use tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext, Tensor};

use crate::check::{Check, Limit, Unit};
use crate::counting_alloc::HEAP;
use crate::models::ModelSource;

/// Tokens per training sequence.
pub const SEQ_LEN: usize = 16;
/// Steps run before measuring (the first makes the optimizer's moments).
pub const WARMUP_STEPS: usize = 2;
/// Steps measured.
pub const MEASURED_STEPS: usize = 4;

/// A tiny transformer with its parameters in a store, its optimizer and the data.
pub struct Trainer {
    /// The pool every transient comes from.
    pub pool: HostPool,
    ctx: ExecContext,
    ag: Autograd,
    config: ModelConfig,
    /// The weights, their variables replaced by the store's current ones each step.
    template: ModelWeights,
    params: ParamStore,
    ids: Vec<ParamId>,
    opt: AdamW,
    inputs: Vec<u32>,
    targets: Tensor,
    /// The gradients, one store reused by every step.
    grads: GradStore,
    /// What the weights hold between steps (a one-element constant).
    released: tempra_autograd::Var,
}

impl Trainer {
    /// Copies `file`'s weights into trainable parameters (persistent, outside the pool).
    pub fn new(file: &ModelFile, threads: usize) -> Result<Self> {
        let config = ModelConfig::from_metadata(file.metadata())?;
        let template = ModelWeights::from_file(file, &config)?;
        let pool = HostPool::host();
        let ctx = ExecContext::new(Arc::new(CpuBackend::with_threads(pool.clone(), threads)));
        let mut params = ParamStore::new();
        let mut ids = Vec::new();
        template.map(|w| {
            let id = params.add(&format!("p{}", ids.len()), ctx.persistent_copy(w.tensor())?)?;
            ids.push(id);
            Ok(w.clone())
        })?;
        let vocab = config.vocab_size as u32;
        let sequence: Vec<u32> = (0..=SEQ_LEN as u32).map(|i| (i * 13 + 3) % vocab).collect();
        let targets = ctx.from_slice(&sequence[1..], &[SEQ_LEN])?;
        let released = tempra_autograd::Var::constant(ctx.zeros_persistent(&[1], DType::F32)?);
        Ok(Self {
            pool,
            ag: Autograd::new(ctx.clone()),
            ctx,
            config,
            template,
            params,
            ids,
            opt: AdamW::new(AdamWConfig::default())?,
            inputs: sequence[..SEQ_LEN].to_vec(),
            targets,
            grads: GradStore::new(),
            released,
        })
    }

    /// One step: forward, loss, backward, AdamW. Returns the loss.
    pub fn step(&mut self) -> Result<f64> {
        let loss = {
            // The store's current variables swapped into the weights in place (building
            // a new `ModelWeights` per step would allocate its layer list).
            let (params, ids) = (&self.params, &self.ids);
            let (mut next, mut missing) = (0, false);
            self.template.for_each_mut(|v| {
                match ids.get(next).and_then(|&id| params.var(id)) {
                    Some(var) => *v = var.clone(),
                    None => missing = true,
                }
                next += 1;
            });
            if missing {
                return Err(LlmError::Argument {
                    what: "a weight missing from the parameter store".into(),
                }
                .into());
            }
            let weights = &self.template;
            let logits = forward(
                &self.ag,
                &self.config,
                weights,
                &self.inputs,
                None,
                LogitRows::All,
            )?;
            let loss = self.ag.cross_entropy(&logits, &self.targets, None)?;
            let value = loss.tensor().to_vec_f64()?[0];
            self.ag.backward_into(&loss, &mut self.grads)?;
            value
        };
        // Let go of the variables before the update, so each parameter is held by its
        // store alone and AdamW updates it in place.
        let released = &self.released;
        self.template.for_each_mut(|v| *v = released.clone());
        let report = self.opt.step(&self.ctx, &mut self.params, &self.grads)?;
        // The gradients go back to the pool now; the store keeps its capacity.
        self.grads.clear();
        anyhow::ensure!(
            report.skipped == 0,
            "{} parameters got no gradient",
            report.skipped
        );
        Ok(loss)
    }
}

/// The target for heap allocations per facade op in a training step (tape nodes, saved
/// views and gradients are allocated per op).
pub const ALLOCS_PER_OP_TARGET: f64 = 2.0;

/// Runs the scenario on the f32 model `model` and appends its checks to `out`.
pub fn run(model: &ModelSource, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    let file = model.open()?;
    let mut trainer = Trainer::new(&file, threads)?;
    let name = |what: &str| format!("train.{}.{what}", model.name);
    let first = trainer.step()?;
    for _ in 1..WARMUP_STEPS {
        trainer.step()?;
    }
    let pool_before = trainer.pool.stats();
    let heap_before = HEAP.snapshot();
    let mut last = first;
    for _ in 0..MEASURED_STEPS {
        last = trainer.step()?;
    }
    let heap_after = HEAP.snapshot();
    let pool_after = trainer.pool.stats();
    let acquires = (pool_after.hits + pool_after.misses) - (pool_before.hits + pool_before.misses);
    let allocs = heap_after.allocs_since(&heap_before);
    let steps = MEASURED_STEPS as f64;
    let measured = format!(
        "{MEASURED_STEPS} steps after {WARMUP_STEPS} warm-up, {SEQ_LEN} tokens; loss {first:.3} -> {last:.3}"
    );
    out.push(
        Check::new(
            name("pool_misses"),
            (pool_after.misses - pool_before.misses) as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note(measured),
    );
    out.push(
        Check::new(
            name("large_heap_allocs"),
            heap_after.large_allocs_since(&heap_before) as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note(
            "heap allocations of 4 KiB or more (backward reuses Autograd's scratch and the \
             trainer's GradStore)",
        ),
    );
    out.push(Check::new(
        name("live_heap_growth"),
        heap_after.live_growth_since(&heap_before) as f64,
        Unit::Bytes,
        Limit::Within(crate::scenarios::decode::FLAT_HEAP_NOISE_BYTES),
    ));
    out.push(
        Check::info(name("ops_per_step"), acquires as f64 / steps, Unit::Ratio)
            .with_note("pool acquires per step (forward, backward and optimizer ops)"),
    );
    out.push(Check::info(
        name("heap_allocs_per_step"),
        allocs as f64 / steps,
        Unit::Ratio,
    ));
    let per_op = if acquires == 0 {
        0.0
    } else {
        allocs as f64 / acquires as f64
    };
    out.push(
        Check::new(
            name("heap_allocs_per_op"),
            per_op,
            Unit::Ratio,
            Limit::Below(ALLOCS_PER_OP_TARGET),
        )
        .with_note("tape nodes, saved views, grads per pool acquire"),
    );
    Ok(())
}
