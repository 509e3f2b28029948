//! `ChunkPacer`: how many prompt tokens a mixed step may carry beside the decode rows.
//!
//! A step with no decode rows takes as many prompt tokens as the step arena holds: no
//! stream waits on it. A step with decode rows is every running stream's gap between two
//! tokens, so its prompt chunk is sized to keep that step within the gap factor times a
//! decode-only step (the target; `ServerConfig::prefill_gap_percent`). The pacer times the steps: decode-only ones give the
//! target (a moving average; while there is none, a step with decode rows carries no
//! prompt, so that one is timed); each mixed step scales the chunk by target / elapsed
//! (at most twofold either way), which follows the prompt's cost per token as it grows
//! with the position. The first chunk comes from the cost per token of the prompt-only
//! steps. A chunk never goes below [`MIN_CHUNK`] tokens, so a prompt always makes
//! progress.
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
/// The weight of the newest sample in each moving average.
const SMOOTHING: f64 = 0.3;

/// The pacer's cost estimates.
#[derive(Debug)]
pub(crate) struct ChunkPacer {
    /// Tokens one step holds (the step arena's rows).
    max_tokens: usize,
    /// The longest a mixed step may take, in decode-only steps.
    gap: f64,
    /// Seconds of a decode-only step (moving average), once one was timed.
    decode_step: Option<f64>,
    /// Seconds per token of prompt-only steps (moving average), once one was timed.
    prompt_token: Option<f64>,
    /// The chunk of the next mixed step, once one can be sized.
    chunk: Option<f64>,
}

impl ChunkPacer {
    /// A pacer for steps of at most `max_tokens` tokens, a mixed step taking at most
    /// `gap` decode-only steps (more than 1).
    pub(crate) fn new(max_tokens: usize, gap: f64) -> ChunkPacer {
        ChunkPacer {
            max_tokens: max_tokens.max(1),
            gap,
            decode_step: None,
            prompt_token: None,
            chunk: None,
        }
    }

    /// The prompt tokens the next step may carry beside `decode_rows` decode rows (zero
    /// when the decode rows fill the step, or when no decode-only step was timed yet).
    pub(crate) fn budget(&self, decode_rows: usize) -> usize {
        let room = self.max_tokens.saturating_sub(decode_rows);
        if decode_rows == 0 {
            return room;
        }
        let Some(step) = self.decode_step else {
            return 0;
        };
        let chunk = self.chunk.unwrap_or_else(|| match self.prompt_token {
            Some(per_token) if per_token > 0.0 => (self.gap - 1.0) * step / per_token,
            _ => MIN_CHUNK as f64,
        });
        (chunk as usize).max(MIN_CHUNK).min(room)
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
            (_, 0) => self.decode_step = Some(average(self.decode_step, seconds)),
            (0, _) => {
                let per_token = seconds / prompt_tokens as f64;
                self.prompt_token = Some(average(self.prompt_token, per_token));
            }
            (_, _) => {
                let Some(step) = self.decode_step else {
                    return;
                };
                let target = self.gap * step;
                // A chunk cut short by the end of the prompts says nothing about a
                // longer one unless it was already too long.
                if prompt_tokens < budget && seconds <= target {
                    return;
                }
                let scale = (target / seconds).clamp(0.5, 2.0);
                self.chunk = Some((prompt_tokens as f64 * scale).max(MIN_CHUNK as f64));
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
    /// weights in 25 ms and computes a token in 4 ms, overlapping the two.
    fn machine(rows: usize, k: usize) -> Duration {
        ms(25f64.max(4.0 * (rows + k) as f64))
    }

    #[test]
    fn mixed_steps_settle_within_the_target() {
        let mut pacer = ChunkPacer::new(512, 2.0);
        pacer.record(0, 512, 512, machine(0, 512));
        pacer.record(1, 0, 0, machine(1, 0));
        // The first chunk from the prompt-only cost per token: 25 ms / 4 ms.
        assert_eq!(pacer.budget(1), 6);
        let target = 2.0 * 25.0;
        let mut chunks = Vec::new();
        for _ in 0..12 {
            let budget = pacer.budget(1);
            let took = machine(1, budget);
            assert!(
                took.as_secs_f64() * 1e3 <= target * 1.01,
                "{budget} tokens: {took:?}"
            );
            pacer.record(1, budget, budget, took);
            chunks.push(budget);
        }
        // 50 ms hold 12.5 tokens of 4 ms: eleven beside the decode row.
        assert!(
            chunks[4..].iter().all(|&c| (11..=12).contains(&c)),
            "{chunks:?}"
        );
    }

    #[test]
    fn a_costlier_prompt_shrinks_the_chunk_and_a_short_one_keeps_it() {
        let mut pacer = ChunkPacer::new(512, 2.0);
        pacer.record(1, 0, 0, ms(25.0));
        pacer.record(1, 40, 40, ms(50.0));
        assert_eq!(pacer.budget(1), 40);
        // Deeper into the prompt each token costs twice as much.
        pacer.record(1, 40, 40, ms(100.0));
        assert_eq!(pacer.budget(1), 20);
        // The prompt's last 5 tokens, quickly: the chunk stays.
        pacer.record(1, 5, 20, ms(30.0));
        assert_eq!(pacer.budget(1), 20);
        // A slow decode step never stops the prompt.
        pacer.record(1, 8, 8, ms(2000.0));
        pacer.record(1, 8, 8, ms(2000.0));
        assert_eq!(pacer.budget(1), MIN_CHUNK);
    }
}
