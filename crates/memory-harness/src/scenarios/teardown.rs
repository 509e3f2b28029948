//! Teardown: after an engine session, a training run and a `Model`/`Session` generation,
//! the pool holds no lease (`close()` succeeds) and the live heap is back to its level
//! before the session.

use anyhow::Result;
use tempra_llm::engine::{Generation, LoadOptions, Model, Sampler, SamplerConfig, StopConditions};

use crate::check::{Check, Limit, Unit};
use crate::counting_alloc::HEAP;
use crate::cpu_engine::CpuEngine;
use crate::models::ModelSource;
use crate::scenarios::training::Trainer;

/// How far the live heap may end from its level before a session.
pub const HEAP_SLACK_BYTES: f64 = 64.0 * 1024.0;
/// Tokens each session decodes.
const TOKENS: usize = 16;
/// Each session's context length.
const CONTEXT: usize = 64;

/// Runs the three teardowns and appends their checks to `out`.
pub fn run(
    model: &ModelSource,
    train_model: &ModelSource,
    threads: usize,
    out: &mut Vec<Check>,
) -> Result<()> {
    engine_session(model, threads, out)?;
    training_run(train_model, threads, out)?;
    model_session(model, threads, out)
}

fn heap_check(name: String, before: &crate::counting_alloc::HeapSnapshot) -> Check {
    let growth = HEAP.snapshot().live_growth_since(before);
    Check::new(
        name,
        growth as f64,
        Unit::Bytes,
        Limit::Within(HEAP_SLACK_BYTES),
    )
    .with_note("live heap after teardown minus before the session")
}

fn close_check(name: String, result: Result<(), tempra_pool::PoolError>) -> Check {
    match result {
        Ok(()) => {
            Check::new(name, 0.0, Unit::Count, Limit::AtMost(0.0)).with_note("close() succeeded")
        }
        Err(e) => Check::new(name, 1.0, Unit::Count, Limit::AtMost(0.0))
            .with_note(format!("close() failed: {e}")),
    }
}

fn engine_session(model: &ModelSource, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    let name = |what: &str| format!("teardown.engine.{}.{what}", model.name);
    let before = HEAP.snapshot();
    let pool = {
        let file = model.open()?;
        let engine = CpuEngine::new(&file, threads)?;
        let mut cache = engine.kv_cache(CONTEXT)?;
        let mut token = engine.run(&mut cache, &[1, 2, 3, 4])?;
        for _ in 0..TOKENS {
            token = engine.run(&mut cache, &[token])?;
        }
        engine.pool.clone()
    };
    out.push(
        Check::new(
            name("pool_outstanding"),
            pool.outstanding() as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note("leases live after the engine and its cache dropped"),
    );
    out.push(close_check(name("pool_close"), pool.close()));
    drop(pool);
    out.push(heap_check(name("live_heap_vs_before"), &before));
    Ok(())
}

fn training_run(model: &ModelSource, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    let name = |what: &str| format!("teardown.train.{}.{what}", model.name);
    let before = HEAP.snapshot();
    let pool = {
        let file = model.open()?;
        let mut trainer = Trainer::new(&file, threads)?;
        for _ in 0..3 {
            trainer.step()?;
        }
        trainer.pool.clone()
    };
    out.push(
        Check::new(
            name("pool_outstanding"),
            pool.outstanding() as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note("leases live after 3 steps and the trainer dropped"),
    );
    out.push(close_check(name("pool_close"), pool.close()));
    drop(pool);
    out.push(heap_check(name("live_heap_vs_before"), &before));
    Ok(())
}

fn model_session(model: &ModelSource, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    let name = |what: &str| format!("teardown.session.{}.{what}", model.name);
    let before = HEAP.snapshot();
    {
        let options = LoadOptions {
            tokenizer: model.tokenizer.clone(),
            threads: Some(threads),
            context_length: Some(CONTEXT),
            ..LoadOptions::default()
        };
        let loaded = Model::load(&model.path, &options)?;
        {
            let mut session = loaded.session()?;
            let stop = StopConditions {
                max_tokens: Some(TOKENS),
                ignore_eog: true,
                ..StopConditions::default()
            };
            let sampler = Sampler::new(SamplerConfig::greedy());
            let mut generation = Generation::new(&mut session, &[1, 2, 3, 4], sampler, stop)?;
            for piece in generation.by_ref() {
                piece?;
            }
        }
        let outstanding = loaded.autograd().ctx().pool_stats().outstanding;
        out.push(
            Check::new(
                name("pool_outstanding"),
                outstanding as f64,
                Unit::Count,
                Limit::AtMost(0.0),
            )
            .with_note("Model::load, Session, Generation; leases live after the session dropped"),
        );
    }
    out.push(heap_check(name("live_heap_vs_before"), &before));
    Ok(())
}
