//! `ChunkPacer`: how many prompt tokens a mixed step may carry beside the decode rows.
//!
//! A step with no decode rows takes as many prompt tokens as the step arena holds: no
//! stream waits on it. A step with decode rows is every running stream's gap between two
//! tokens, so its prompt chunk is sized to keep that step within the gap factor times a
//! decode-only step (the target; `ServerConfig::prefill_gap_percent`).
//!
//! - The decode-only step is the median of the latest ones. While none was timed, a step
//!   with decode rows carries no prompt, so that one is timed.
//! - The first chunk comes from the cost per token of the prompt-only steps. Each mixed
//!   step then gives the chunk that would have fit the target, its chunk scaled by
//!   target / elapsed (at most twofold either way), which follows the prompt's cost per
//!   token as it grows with the position. A step over the target sets the chunk at once;
//!   one under it moves the chunk by a moving average.
//! - The chunk is fractional, a step's budget the nearest whole number of tokens: a step
//!   lands within half a token's cost of the target (a floor, 4 tokens for a chunk of 4.7,
//!   held the steps up to a token's cost under it; carrying the fraction to later steps
//!   met it on average but let steps overshoot by a whole token, the streams' largest
//!   gaps).
//! - A chunk never goes below [`MIN_CHUNK`] tokens, so a prompt always makes progress.
//!
//! Doubling a chunk overshoots the target little: a step that took less than the target
//! was either short of compute (twice the chunk costs at most twice the compute) or bound
//! by reading the weights, which a decode-only step pays too.
//!
//! Chunk sizes never change tokens: the engine's rows are bit-identical however a prompt
//! is split (`step_spans`).

use std::time::Duration;

/// The fewest prompt tokens a mixed step carries.
pub(crate) const MIN_CHUNK: usize = 4;
/// The weight of the newest sample in the moving averages.
const SMOOTHING: f64 = 0.3;
/// Decode-only steps whose median is the decode step.
const DECODE_SAMPLES: usize = 32;

/// The pacer's cost estimates.
#[derive(Debug)]
pub(crate) struct ChunkPacer {
    /// Tokens one step holds (the step arena's rows).
    max_tokens: usize,
    /// The longest a mixed step may take, in decode-only steps.
    gap: f64,
    /// Seconds of the latest decode-only steps (a ring of the last [`DECODE_SAMPLES`]).
    decode_steps: [f64; DECODE_SAMPLES],
    /// Decode-only steps timed so far.
    decode_count: usize,
    /// Seconds per token of prompt-only steps (moving average), once one was timed.
    prompt_token: Option<f64>,
    /// The chunk that fits the target (moving average, in fractional tokens), once a
    /// mixed step was timed.
    chunk: Option<f64>,
}

impl ChunkPacer {
    /// A pacer for steps of at most `max_tokens` tokens, a mixed step taking at most
    /// `gap` decode-only steps (more than 1).
    pub(crate) fn new(max_tokens: usize, gap: f64) -> ChunkPacer {
        ChunkPacer {
            max_tokens: max_tokens.max(1),
            gap,
            decode_steps: [0.0; DECODE_SAMPLES],
            decode_count: 0,
            prompt_token: None,
            chunk: None,
        }
    }

    /// Seconds of a decode-only step: the median of the latest ones (a slow step, a page
    /// fault or a preempted thread, moves it little), once one was timed.
    fn decode_step(&self) -> Option<f64> {
        let n = self.decode_count.min(DECODE_SAMPLES);
        if n == 0 {
            return None;
        }
        let mut times = self.decode_steps;
        let times = &mut times[..n];
        let (_, median, _) = times.select_nth_unstable_by(n / 2, f64::total_cmp);
        Some(*median)
    }

    /// The chunk the next mixed step aims at (fractional tokens), once a decode-only
    /// step was timed: the measured one, else one from the prompt-only cost per token.
    fn aim(&self) -> Option<f64> {
        let step = self.decode_step()?;
        Some(self.chunk.unwrap_or_else(|| match self.prompt_token {
            Some(per_token) if per_token > 0.0 => (self.gap - 1.0) * step / per_token,
            _ => MIN_CHUNK as f64,
        }))
    }

    /// The prompt tokens the next step may carry beside `decode_rows` decode rows (zero
    /// when the decode rows fill the step, or when no decode-only step was timed yet).
    pub(crate) fn budget(&self, decode_rows: usize) -> usize {
        let room = self.max_tokens.saturating_sub(decode_rows);
        if decode_rows == 0 {
            return room;
        }
        let Some(aim) = self.aim() else {
            return 0;
        };
        (aim.round() as usize).max(MIN_CHUNK).min(room)
    }

    /// Records a step of `decode_rows` decode rows and `prompt_tokens` prompt tokens
    /// that took `elapsed`; `budget` is what [`ChunkPacer::budget`] allowed it.
    pub(crate) fn record(
        &mut self,
        decode_rows: usize,
        prompt_tokens: usize,
        budget: usize,
        elapsed: Duration,
    ) {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        match (decode_rows, prompt_tokens) {
            (0, 0) => {}
            (_, 0) => {
                self.decode_steps[self.decode_count % DECODE_SAMPLES] = seconds;
                self.decode_count += 1;
            }
            (0, _) => {
                let per_token = seconds / prompt_tokens as f64;
                self.prompt_token = Some(average(self.prompt_token, per_token));
            }
            (_, _) => {
                let Some(step) = self.decode_step() else {
                    return;
                };
                let target = self.gap * step;
                // A chunk cut short by the end of the prompts says nothing about a
                // longer one unless it was already too long.
                if prompt_tokens < budget && seconds <= target {
                    return;
                }
                let fits = prompt_tokens as f64 * (target / seconds).clamp(0.5, 2.0);
                // Too long a step shrinks the chunk at once (the streams' gaps); a short
                // one grows it by the moving average (a noisy step moves it little).
                let chunk = if seconds > target {
                    fits
                } else {
                    average(self.chunk, fits)
                };
                self.chunk = Some(chunk.max(MIN_CHUNK as f64));
            }
        }
    }
}

/// `old` moved toward `sample` by [`SMOOTHING`] (the sample itself when there is none).
fn average(old: Option<f64>, sample: f64) -> f64 {
    old.map_or(sample, |o| o + SMOOTHING * (sample - o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: f64) -> Duration {
        Duration::from_secs_f64(n / 1e3)
    }

    #[test]
    fn with_no_decode_rows_a_step_takes_the_whole_arena() {
        let mut pacer = ChunkPacer::new(512, 2.0);
        assert_eq!(pacer.budget(0), 512);
        // No decode-only step timed yet: the next step with decode rows is one.
        assert_eq!(pacer.budget(3), 0);
        pacer.record(3, 0, 0, ms(10.0));
        assert_eq!(pacer.budget(3), MIN_CHUNK, "no cost per token known");
        let mut small = ChunkPacer::new(20, 2.0);
        small.record(16, 0, 0, ms(10.0));
        assert_eq!(small.budget(16), 4, "the room left by the rows");
    }

    /// A step of `rows` decode rows and `k` prompt tokens on a machine that reads the
    /// weights in 25 ms and computes a token in `token` ms, overlapping the two.
    fn machine(rows: usize, k: usize, token: f64) -> Duration {
        ms(25f64.max(token * (rows + k) as f64))
    }

    /// Runs `steps` mixed steps of one decode row on `machine` with a cost of `token` ms
    /// per token; returns each step's chunk and time (ms).
    fn run(pacer: &mut ChunkPacer, steps: usize, token: f64) -> Vec<(usize, f64)> {
        (0..steps)
            .map(|_| {
                let budget = pacer.budget(1);
                let took = machine(1, budget, token);
                pacer.record(1, budget, budget, took);
                (budget, took.as_secs_f64() * 1e3)
            })
            .collect()
    }

    #[test]
    fn mixed_steps_settle_on_the_target() {
        let mut pacer = ChunkPacer::new(512, 2.0);
        pacer.record(0, 512, 512, machine(0, 512, 4.0));
        pacer.record(1, 0, 0, machine(1, 0, 4.0));
        // The first chunk from the prompt-only cost per token: 25 ms / 4 ms.
        assert_eq!(pacer.budget(1), 6);
        let target = 2.0 * 25.0;
        let steps = run(&mut pacer, 40, 4.0);
        // 50 ms hold 12.5 tokens of 4 ms: 11.5 beside the decode row, so the steps settle
        // within half a token's cost of the target.
        let settled = &steps[10..];
        assert!(
            settled.iter().all(|&(k, _)| (11..=12).contains(&k)),
            "{steps:?}"
        );
        assert!(
            settled.iter().all(|&(_, t)| (t - target).abs() <= 2.0),
            "{steps:?}"
        );
    }

    #[test]
    fn a_fractional_chunk_rounds_to_the_nearest_token() {
        // Tokens of 7 ms beside a 25 ms decode step at gap 2: from 4 tokens (35 ms) the
        // chunk that fits is 5.7, so 6 tokens (49 ms), where a floor held 5 (42 ms).
        let mut pacer = ChunkPacer::new(512, 2.0);
        pacer.record(1, 0, 0, ms(25.0));
        let steps = run(&mut pacer, 30, 7.0);
        assert_eq!(steps[0], (MIN_CHUNK, 35.0));
        assert!(steps[3..].iter().all(|&(k, _)| k == 6), "{steps:?}");
    }

    #[test]
    fn the_decode_step_is_the_median_of_the_latest() {
        let mut pacer = ChunkPacer::new(512, 2.0);
        for _ in 0..10 {
            pacer.record(1, 0, 0, ms(20.0));
        }
        // A preempted step moves the target little.
        pacer.record(1, 0, 0, ms(400.0));
        assert_eq!(pacer.decode_step(), Some(0.02));
        // The latest steps replace the oldest.
        for _ in 0..DECODE_SAMPLES {
            pacer.record(1, 0, 0, ms(30.0));
        }
        assert_eq!(pacer.decode_step(), Some(0.03));
    }

    #[test]
    fn a_costlier_prompt_shrinks_the_chunk_and_a_short_one_keeps_it() {
        let mut pacer = ChunkPacer::new(512, 2.0);
        pacer.record(1, 0, 0, ms(25.0));
        pacer.record(1, 40, 40, ms(50.0));
        assert_eq!(pacer.budget(1), 40);
        // Deeper into the prompt each token costs twice as much: too long a step halves
        // the chunk at once.
        pacer.record(1, 40, 40, ms(100.0));
        assert_eq!(pacer.budget(1), 20);
        // The prompt's last 5 tokens, quickly: the chunk stays.
        pacer.record(1, 5, 20, ms(30.0));
        assert_eq!(pacer.budget(1), 20);
        // A quick full step grows it by the moving average only: 20 · 50 / 40 = 25, so
        // 21.5, which rounds to 22.
        pacer.record(1, 20, 20, ms(40.0));
        assert_eq!(pacer.budget(1), 22);
        // A slow decode step never stops the prompt.
        pacer.record(1, 8, 8, ms(2000.0));
        pacer.record(1, 8, 8, ms(2000.0));
        assert_eq!(pacer.budget(1), MIN_CHUNK);
    }
}
