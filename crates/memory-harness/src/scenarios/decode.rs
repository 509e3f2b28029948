//! Steady-state decode and peak memory on the CPU engine: after a prompt and a few
//! warm-up tokens, further tokens must make no pool miss and no large heap allocation,
//! leave the live heap flat, and keep the transient peak within 1.5x of one block's live
//! set.

use anyhow::Result;
use tempra_tensor::handoff::{describe, handoffs_since};

use crate::block_bound::BlockDims;
use crate::check::{Check, Limit, Unit};
use crate::counting_alloc::HEAP;
use crate::cpu_engine::CpuEngine;
use crate::models::ModelSource;

/// Prompt length (one prefill batch).
pub const PROMPT_TOKENS: usize = 16;
/// Tokens decoded before measuring.
pub const WARMUP_TOKENS: usize = 4;
/// Tokens decoded while measuring.
pub const MEASURED_TOKENS: usize = 32;
/// Each session's context length.
pub const CONTEXT: usize = 128;
/// Tokens decoded after the trim before the peak is measured.
pub const PEAK_WARMUP_TOKENS: usize = 2;
/// Tokens over which the decode peak is measured.
pub const PEAK_TOKENS: usize = 8;
/// How far the live heap may move over the measured tokens or steps: it is counted
/// process-wide, so a one-off allocation or free on another thread (a worker's lazy
/// thread-local set-up) shows up as a few bytes; a per-token leak grows past this.
pub const FLAT_HEAP_NOISE_BYTES: f64 = 1024.0;
/// The allowed ratio of the decode transient peak to one block's live set.
pub const PEAK_RATIO: f64 = 1.5;

/// Runs the scenario on `model` and appends its checks to `out`.
pub fn run(model: &ModelSource, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    let file = model.open()?;
    let engine = CpuEngine::new(&file, threads)?;
    let dims = BlockDims::from(&engine.config);
    let vocab = engine.config.vocab_size as u32;
    let name = |what: &str| format!("decode.{}.{what}", model.name);

    let mut cache = engine.kv_cache(CONTEXT)?;
    out.push(
        Check::info(
            name("kv_cache_reserved"),
            engine.kv_cache_bytes(CONTEXT) as f64,
            Unit::Bytes,
        )
        .with_note(format!(
            "f16, {CONTEXT} positions, {} layers",
            engine.config.block_count
        )),
    );

    // Prefill: its pool peak against the block's live set at the prompt's length.
    let prompt: Vec<u32> = (0..PROMPT_TOKENS as u32)
        .map(|i| (i * 37 + 5) % vocab)
        .collect();
    engine.pool.reset_peak();
    let handoffs_before = engine.ag.ctx().handoffs();
    let mut token = engine.run(&mut cache, &prompt)?;
    let prefill_peak = engine.pool.stats().peak_outstanding_bytes;
    // Float weights go through the packed f32 GEMM, whose tasks (one per thread) pack up
    // to a whole weight panel each; quantized weights are read in place.
    let packs = !engine.weights.layers[0].wq.dtype().is_quantized();
    let packing = if packs {
        threads * dims.largest_projection_f32_bytes()
    } else {
        0
    };
    // Several positions run blocked attention, one scratch lease per task.
    let attention = threads * dims.blocked_attention_bytes();
    let prefill_bound = PEAK_RATIO * (dims.live_bytes(PROMPT_TOKENS) + packing + attention) as f64;
    out.push(
        Check::new(name("prefill_pool_peak"), prefill_peak as f64, Unit::Bytes, Limit::AtMost(prefill_bound))
            .with_note(format!(
                "{PROMPT_TOKENS}-token prompt; limit 1.5x (one block's live set at {PROMPT_TOKENS} positions, {} B, + GEMM packing {packing} B + attention tiles {attention} B)",
                dims.live_bytes(PROMPT_TOKENS)
            )),
    );

    for _ in 0..WARMUP_TOKENS {
        token = engine.run(&mut cache, &[token])?;
    }

    let pool_before = engine.pool.stats();
    engine.pool.reset_peak();
    HEAP.reset_peak();
    let heap_before = HEAP.snapshot();
    let mut worst_excursion = 0i64;
    for _ in 0..MEASURED_TOKENS {
        token = engine.run(&mut cache, &[token])?;
        let growth = HEAP.snapshot().live_growth_since(&heap_before);
        if growth.abs() > worst_excursion.abs() {
            worst_excursion = growth;
        }
    }
    let heap_after = HEAP.snapshot();
    let pool_after = engine.pool.stats();
    let handoffs = handoffs_since(&handoffs_before, &engine.ag.ctx().handoffs());

    let misses = pool_after.misses - pool_before.misses;
    let acquires = (pool_after.hits + pool_after.misses) - (pool_before.hits + pool_before.misses);
    let allocs = heap_after.allocs_since(&heap_before);
    let tokens = MEASURED_TOKENS as f64;
    let ops_per_token = acquires as f64 / tokens;
    let allocs_per_op = if acquires == 0 {
        0.0
    } else {
        allocs as f64 / acquires as f64
    };
    let measured =
        format!("{MEASURED_TOKENS} tokens after {PROMPT_TOKENS} prompt + {WARMUP_TOKENS} warm-up");

    out.push(
        Check::new(
            name("handoffs"),
            handoffs.values().sum::<u64>() as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note(format!(
            "ops the CPU backend handed to the reference kernels over prefill, warm-up and measured tokens: {}",
            describe(&handoffs)
        )),
    );
    out.push(
        Check::new(
            name("pool_misses"),
            misses as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note(measured.clone()),
    );
    out.push(
        Check::new(
            name("large_heap_allocs"),
            heap_after.large_allocs_since(&heap_before) as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note("heap allocations of 4 KiB or more"),
    );
    out.push(
        Check::new(
            name("live_heap_growth"),
            heap_after.live_growth_since(&heap_before) as f64,
            Unit::Bytes,
            Limit::Within(FLAT_HEAP_NOISE_BYTES),
        )
        .with_note(format!(
            "end minus start; largest excursion between tokens {worst_excursion} B"
        )),
    );
    out.push(
        Check::info(name("ops_per_token"), ops_per_token, Unit::Ratio)
            .with_note("facade ops counted as pool acquires (one per op output or scratch lease)"),
    );
    out.push(
        Check::new(
            name("heap_allocs_per_token"),
            allocs as f64 / tokens,
            Unit::Ratio,
            Limit::Below(1.0),
        )
        .with_note(
            "heap allocations of any size per token (every intermediate is a step-arena \
             view); counted process-wide, so a one-off on another thread reads 1/32, \
             anything made per token at least 1",
        ),
    );
    out.push(
        Check::info(name("heap_allocs_per_op"), allocs_per_op, Unit::Ratio)
            .with_note("heap allocations per pool acquire (kernel scratch leases)"),
    );
    let arena = engine.arena_stats();
    out.push(
        Check::new(
            name("arena_pool_outputs"),
            (arena.pool_outputs + arena.replaced) as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note(format!(
            "outputs that missed their step-arena slot or replaced its buffer, over {} steps",
            arena.steps
        )),
    );

    out.push(
        Check::info(
            name("pool_peak_after_prefill"),
            pool_after.peak_outstanding_bytes as f64,
            Unit::Bytes,
        )
        .with_note(
            "block bytes handed out, including cached prefill blocks reused for smaller requests",
        ),
    );

    // The peak against the block bound, on blocks sized for decode: right after a prefill
    // the pool hands decode's requests cached prefill blocks up to 4x their class (its
    // bounded-waste policy), which counts as outstanding bytes without costing memory.
    engine.pool.trim();
    for _ in 0..PEAK_WARMUP_TOKENS {
        token = engine.run(&mut cache, &[token])?;
    }
    engine.pool.reset_peak();
    HEAP.reset_peak();
    let heap_start = HEAP.snapshot();
    for _ in 0..PEAK_TOKENS {
        token = engine.run(&mut cache, &[token])?;
    }
    let pool_peak = engine.pool.stats().peak_outstanding_bytes;
    let heap_peak = HEAP
        .snapshot()
        .peak_live_bytes
        .saturating_sub(heap_start.live_bytes);
    let bound = PEAK_RATIO * dims.live_bytes(1) as f64;
    out.push(
        Check::new(name("decode_transient_peak"), (pool_peak + heap_peak) as f64, Unit::Bytes, Limit::AtMost(bound))
            .with_note(format!(
                "pool peak {pool_peak} B + heap above start {heap_peak} B over {PEAK_TOKENS} tokens after a trim; limit 1.5x one block's live set ({} B)",
                dims.live_bytes(1)
            )),
    );

    drop(cache);
    let stats = engine.pool.stats();
    out.push(
        Check::new(
            name("pool_outstanding_after"),
            stats.outstanding as f64,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note("leases live after the session's cache dropped"),
    );
    Ok(())
}
