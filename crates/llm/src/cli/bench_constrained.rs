//! `tempra bench --json-schema FILE` (or `--grammar FILE`): what constrained sampling
//! costs in decode. Two tests of `-n` tokens each, one token at a time from an empty
//! cache with the sampled token fed back: sampling with the `--temp`/`--top-k`/...
//! settings, and the same with the output held to the grammar (a new output starts
//! whenever one completes; tokens left over that cannot hold a whole output are sampled
//! freely). Their rounds alternate, so both see the same machine load;
//! the time spent choosing tokens (sampling, plus masks for the grammar) is reported
//! apart from the forward passes.

use std::time::{Duration, Instant};

use tempra_llm::engine::{Model, Sampler, SamplerConfig, Session, logits_slice};
use tempra_llm::grammar::MaskCounts;

use crate::cli::bench::Rate;
use crate::cli::constraint_args::OutputGrammar;

/// Rates of the sampled and the constrained test.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConstrainedRates {
    /// Tokens per second, sampling freely.
    pub(crate) sampled: Rate,
    /// Tokens per second under the grammar.
    pub(crate) constrained: Rate,
    /// Mean time to choose a token, sampling freely.
    pub(crate) choose_free: Duration,
    /// Mean time to choose a token under the grammar.
    pub(crate) choose_held: Duration,
    /// Masks computed and served from the cache over the timed constrained runs.
    pub(crate) masks: MaskCounts,
    /// Outputs the grammar completed over the timed runs.
    pub(crate) outputs: usize,
}

impl ConstrainedRates {
    /// How much slower decode is under the grammar, in percent.
    pub(crate) fn slowdown_percent(&self) -> f64 {
        100.0 * (self.sampled.mean / self.constrained.mean.max(1e-9) - 1.0)
    }

    /// Mean time to fill a mask (computed or from the cache), in microseconds.
    pub(crate) fn mask_us_mean(&self) -> f64 {
        let masks = (self.masks.computed + self.masks.cached).max(1);
        self.masks.nanos as f64 / 1e3 / masks as f64
    }
}

fn add(a: MaskCounts, b: MaskCounts) -> MaskCounts {
    MaskCounts {
        computed: a.computed + b.computed,
        cached: a.cached + b.cached,
        nanos: a.nanos + b.nanos,
    }
}

struct Run {
    rate: f64,
    choose: Duration,
    masks: MaskCounts,
    outputs: usize,
}

/// One warm-up round, then `repetitions` rounds of the two tests, alternating.
pub(crate) fn measure(
    model: &Model,
    session: &mut Session,
    grammar: &OutputGrammar,
    sampling: &SamplerConfig,
    n: usize,
    repetitions: usize,
) -> anyhow::Result<ConstrainedRates> {
    let mut free = Vec::new();
    let mut held = Vec::new();
    for round in 0..=repetitions {
        let a = run(model, session, None, sampling, n)?;
        let b = run(model, session, Some(grammar), sampling, n)?;
        if round > 0 {
            free.push(a);
            held.push(b);
        }
    }
    let per_token =
        |runs: &[Run]| runs.iter().map(|r| r.choose).sum::<Duration>() / (runs.len() * n) as u32;
    let masks = held
        .iter()
        .fold(MaskCounts::default(), |m, r| add(m, r.masks));
    Ok(ConstrainedRates {
        sampled: Rate::of(&free.iter().map(|r| r.rate).collect::<Vec<_>>()),
        constrained: Rate::of(&held.iter().map(|r| r.rate).collect::<Vec<_>>()),
        choose_free: per_token(&free),
        choose_held: per_token(&held),
        masks,
        outputs: held.iter().map(|r| r.outputs).sum(),
    })
}

/// `n` tokens sampled into an empty cache, under `grammar` if given.
fn run(
    model: &Model,
    session: &mut Session,
    grammar: Option<&OutputGrammar>,
    sampling: &SamplerConfig,
    n: usize,
) -> anyhow::Result<Run> {
    let vocab = model.vocab();
    session.reset();
    let first = vocab.bos().unwrap_or(0);
    let mut logits = session.prefill(&[first])?;
    let mut sampler = Sampler::new(sampling.clone());
    let mut constraint = grammar.map(|g| g.constraint(n)).transpose()?;
    let mut choose = Duration::ZERO;
    let mut masks = MaskCounts::default();
    let mut outputs = 0;
    let start = Instant::now();
    for produced in 0..n {
        let t0 = Instant::now();
        let values = logits_slice(&logits)?;
        let id = match constraint.as_mut() {
            None => Some(sampler.sample(values, session.tokens())),
            Some(c) => {
                sampler.sample_constrained(values, session.tokens(), c, Some(n - produced))?
            }
        };
        choose += t0.elapsed();
        drop(logits);
        let left = n - produced - 1;
        let id = match id {
            Some(id) if !vocab.is_eog(id) || constraint.is_none() => id,
            // The grammar completed: count the output, start the next one.
            done => {
                outputs += 1;
                if let Some(c) = constraint.take() {
                    masks = add(masks, c.mask_counts());
                }
                constraint = grammar
                    .map(|g| g.constraint(left))
                    .transpose()
                    .ok()
                    .flatten();
                done.unwrap_or(first)
            }
        };
        if left == 0 {
            break;
        }
        logits = session.step(id)?;
    }
    let elapsed = start.elapsed();
    if let Some(c) = &constraint {
        masks = add(masks, c.mask_counts());
    }
    Ok(Run {
        rate: n as f64 / elapsed.as_secs_f64().max(1e-9),
        choose,
        masks,
        outputs,
    })
}
