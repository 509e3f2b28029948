//! Repeated sessions: 100 generate-then-reset cycles on one engine and 20 load-run-drop
//! cycles of a model leave the live heap and the resident set where they were after the
//! first cycles.

use anyhow::Result;
use tempra_llm::engine::{
    Generation, LoadOptions, Model, Sampler, SamplerConfig, Session, StopConditions,
};

use crate::check::{Check, Limit, Unit};
use crate::counting_alloc::{HEAP, HeapSnapshot};
use crate::models::ModelSource;
use crate::process_memory::rss_bytes;

/// Generate-then-reset cycles on one session.
pub const GENERATE_CYCLES: usize = 100;
/// Load-run-drop cycles.
pub const LOAD_CYCLES: usize = 20;
/// Cycles run before the baseline is taken (first-use growth of caches and the allocator).
pub const WARMUP_CYCLES: usize = 2;
/// Live-heap noise allowed between the baseline and the last cycle.
pub const HEAP_NOISE_BYTES: f64 = 64.0 * 1024.0;
/// Resident-set noise allowed between the baseline and the last cycle (the system
/// allocator keeps and returns pages on its own schedule).
pub const RSS_NOISE_BYTES: f64 = 2.0 * 1024.0 * 1024.0;
/// Tokens each cycle generates.
const TOKENS: usize = 16;
/// Each session's context length.
const CONTEXT: usize = 64;

fn options(model: &ModelSource, threads: usize) -> LoadOptions {
    LoadOptions {
        tokenizer: model.tokenizer.clone(),
        threads: Some(threads),
        context_length: Some(CONTEXT),
        ..LoadOptions::default()
    }
}

fn generate(session: &mut Session) -> Result<()> {
    let stop = StopConditions {
        max_tokens: Some(TOKENS),
        ignore_eog: true,
        ..StopConditions::default()
    };
    let mut generation = Generation::new(
        session,
        &[1, 2, 3, 4],
        Sampler::new(SamplerConfig::greedy()),
        stop,
    )?;
    for piece in generation.by_ref() {
        piece?;
    }
    Ok(())
}

fn growth_checks(
    prefix: &str,
    cycles: usize,
    base: (HeapSnapshot, Option<u64>),
    out: &mut Vec<Check>,
) {
    let note = format!("after cycle {cycles} minus after cycle {WARMUP_CYCLES}");
    let growth = HEAP.snapshot().live_growth_since(&base.0);
    out.push(
        Check::new(
            format!("{prefix}.live_heap_growth"),
            growth as f64,
            Unit::Bytes,
            Limit::Within(HEAP_NOISE_BYTES),
        )
        .with_note(note.clone()),
    );
    match (base.1, rss_bytes()) {
        (Some(a), Some(b)) => out.push(
            Check::new(
                format!("{prefix}.rss_growth"),
                b as f64 - a as f64,
                Unit::Bytes,
                Limit::AtMost(RSS_NOISE_BYTES),
            )
            .with_note(note),
        ),
        _ => out.push(Check::skipped(
            format!("{prefix}.rss_growth"),
            false,
            "skipped: no /proc/self/status",
        )),
    }
}

/// Runs both loops on `model` and appends their checks to `out`.
pub fn run(model: &ModelSource, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    let loaded = Model::load(&model.path, &options(model, threads))?;
    let mut session = loaded.session()?;
    let mut base = None;
    for cycle in 1..=GENERATE_CYCLES {
        generate(&mut session)?;
        session.reset();
        if cycle == WARMUP_CYCLES {
            base = Some((HEAP.snapshot(), rss_bytes()));
        }
    }
    if let Some(base) = base {
        growth_checks(
            &format!("repeat.generate_reset.{}", model.name),
            GENERATE_CYCLES,
            base,
            out,
        );
    }
    drop(session);
    drop(loaded);

    let mut base = None;
    for cycle in 1..=LOAD_CYCLES {
        let loaded = Model::load(&model.path, &options(model, threads))?;
        generate(&mut loaded.session()?)?;
        drop(loaded);
        if cycle == WARMUP_CYCLES {
            base = Some((HEAP.snapshot(), rss_bytes()));
        }
    }
    if let Some(base) = base {
        growth_checks(
            &format!("repeat.load_run_drop.{}", model.name),
            LOAD_CYCLES,
            base,
            out,
        );
    }
    Ok(())
}
