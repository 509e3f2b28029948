//! `ChunkPacer`: how many prompt tokens a mixed step may carry beside the decode rows.
//!
//! A step with no decode rows takes as many prompt tokens as the step arena holds: no
//! stream waits on it. A step with decode rows is every running stream's gap between two
//! tokens, so its prompt chunk is sized to keep that step within [`GAP_FACTOR`] times a
//! decode-only step. The pacer learns both costs from the steps it times: the
//! decode-only step's duration, and the time each prompt token adds to a step (each a
//! moving average). Chunks never go below [`MIN_CHUNK`] tokens (a prompt always makes
//! progress) and grow at most twofold from one step to the next (a memory-bound small
//! chunk understates the cost per token).
//!
//! Chunk sizes never change tokens: the engine's rows are bit-identical however a prompt
//! is split (`step_spans`).

use std::time::Duration;

/// The longest a mixed step may take, in decode-only steps.
pub(crate) const GAP_FACTOR: f64 = 2.0;
/// The fewest prompt tokens a mixed step carries.
pub(crate) const MIN_CHUNK: usize = 8;
/// The chunk before any step was timed.
const FIRST_CHUNK: usize = 32;
/// The weight of the newest sample in each moving average.
const SMOOTHING: f64 = 0.3;

/// The pacer's cost estimates.
#[derive(Debug)]
pub(crate) struct ChunkPacer {
    /// Tokens one step holds (the step arena's rows).
    max_tokens: usize,
    /// Seconds of a decode-only step (moving average), once one was timed.
    decode_step: Option<f64>,
    /// Seconds each prompt token adds to a step (moving average), once one was timed.
    per_token: Option<f64>,
    /// The last mixed step's chunk.
    last_chunk: usize,
}

impl ChunkPacer {
    /// A pacer for steps of at most `max_tokens` tokens.
    pub(crate) fn new(max_tokens: usize) -> ChunkPacer {
        ChunkPacer {
            max_tokens: max_tokens.max(1),
            decode_step: None,
            per_token: None,
            last_chunk: FIRST_CHUNK,
        }
    }

    /// The prompt tokens the next step may carry beside `decode_rows` decode rows (zero
    /// when the decode rows fill the step).
    pub(crate) fn budget(&self, decode_rows: usize) -> usize {
        let room = self.max_tokens.saturating_sub(decode_rows);
        if decode_rows == 0 {
            return room;
        }
        let chunk = match (self.decode_step, self.per_token) {
            (Some(step), Some(per_token)) if per_token > 0.0 => {
                let spare = (GAP_FACTOR - 1.0) * step;
                let fits = (spare / per_token).floor() as usize;
                fits.min(self.last_chunk.saturating_mul(2))
            }
            _ => FIRST_CHUNK,
        };
        chunk.max(MIN_CHUNK).min(room)
    }

    /// Records a step of `decode_rows` decode rows and `prompt_tokens` prompt tokens
    /// that took `elapsed`.
    pub(crate) fn record(&mut self, decode_rows: usize, prompt_tokens: usize, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if prompt_tokens == 0 {
            if decode_rows > 0 {
                self.decode_step = Some(average(self.decode_step, seconds));
            }
            return;
        }
        // The prompt tokens' share: what the step took beyond its decode rows.
        let decode = if decode_rows > 0 {
            self.decode_step.unwrap_or(0.0)
        } else {
            0.0
        };
        let per_token = (seconds - decode).max(0.0) / prompt_tokens as f64;
        self.per_token = Some(average(self.per_token, per_token));
        if decode_rows > 0 {
            self.last_chunk = prompt_tokens;
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn with_no_decode_rows_a_step_takes_the_whole_arena() {
        let pacer = ChunkPacer::new(512);
        assert_eq!(pacer.budget(0), 512);
        assert_eq!(pacer.budget(3), FIRST_CHUNK);
        assert_eq!(
            ChunkPacer::new(20).budget(16),
            4,
            "the room left by the rows"
        );
    }

    #[test]
    fn the_chunk_keeps_a_mixed_step_within_the_gap_factor() {
        let mut pacer = ChunkPacer::new(512);
        // Decode-only steps of 25 ms; a prompt alone at 4 ms per token.
        for _ in 0..10 {
            pacer.record(1, 0, ms(25));
        }
        pacer.record(0, 512, ms(2048));
        // (2 - 1) · 25 ms of room at 4 ms per token, but at most twice the last chunk.
        assert_eq!(pacer.budget(1), MIN_CHUNK);
        // A mixed step that took 25 + 16 · 4 ms.
        pacer.record(1, 16, ms(89));
        assert_eq!(pacer.budget(1), MIN_CHUNK);
        // Cheaper tokens (1 ms each) let the chunk grow, twofold per step at most.
        for _ in 0..20 {
            let chunk = pacer.budget(1);
            pacer.record(1, chunk, ms(25 + chunk as u64));
        }
        // 25 ms of room at 1 ms per token (the average approaches it from above).
        assert!((24..=25).contains(&pacer.budget(1)), "{}", pacer.budget(1));
    }

    #[test]
    fn a_slow_decode_step_never_stops_the_prompt() {
        let mut pacer = ChunkPacer::new(512);
        pacer.record(4, 0, ms(1));
        pacer.record(4, 8, ms(801));
        assert_eq!(pacer.budget(4), MIN_CHUNK);
    }
}
