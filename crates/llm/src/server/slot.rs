//! `Slot`: one KV session of the server and the job it is running.

use crate::engine::{
    FinishReason, Pooling, Sampler, Session, TokenLogprob, logits_slice, token_logprobs,
};
use crate::error::Result;
use crate::grammar::OutputConstraint;
use crate::server::admission::{Job, JobEvent};
use crate::server::stop_text::StopText;
use crate::tokenizer::{DetokenizeOptions, TokenStreamDecoder};

/// A session allocated at startup, reused by one job after another (its tokens stay
/// cached for the next job's common prefix).
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) session: Session,
    pub(crate) active: Option<Active>,
}

/// A job running on a slot.
#[derive(Debug)]
pub(crate) struct Active {
    job: Job,
    sampler: Sampler,
    decoder: TokenStreamDecoder,
    stop: StopText,
    constraint: Option<OutputConstraint>,
    cached_tokens: usize,
    produced: usize,
    /// Log-probabilities of tokens whose text is not released yet (held by a stop
    /// string's prefix or an incomplete UTF-8 sequence).
    pending: Vec<TokenLogprob>,
    /// The token sampled last, to run through the model in the next decode step.
    pub(crate) next_token: Option<u32>,
}

/// What became of a job after a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// It goes on: its next token waits in [`Active::next_token`].
    Continue,
    /// It ended (reported on its channel); the slot is free.
    Finished,
    /// Its client went away; the slot is free.
    ClientGone,
}

/// How many logits one step of an echoed prompt's scoring brings to the host at most
/// (its rows run in chunks of this over the vocabulary; the engine's row invariance
/// makes the chunking invisible in the values).
const PROMPT_SCORING_FLOATS: usize = 1 << 22;

/// The length of the longest common prefix of `a` and `b`.
pub(crate) fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// How many of `prompt`'s tokens a session holding `cached` can keep: the common prefix,
/// less one when it is the whole prompt (the last prompt token must run for its logits).
pub(crate) fn reusable_prefix(cached: &[u32], prompt: &[u32]) -> usize {
    common_prefix(cached, prompt).min(prompt.len().saturating_sub(1))
}

impl Slot {
    /// A free slot over `session`.
    pub(crate) fn new(session: Session) -> Slot {
        Slot {
            session,
            active: None,
        }
    }

    /// Starts `job`: keeps the cached prefix it shares with the prompt (at least one
    /// prompt token always runs, for the logits), prefills the rest and samples the first
    /// token. Returns the step and the prompt's last logits (for the forks of a group).
    pub(crate) fn start(&mut self, job: Job) -> Result<(Step, Vec<f32>)> {
        if let Some(pooling) = job.embed {
            return self.embed(job, pooling).map(|step| (step, Vec::new()));
        }
        let reuse = if job.prompt_logprobs {
            0
        } else {
            reusable_prefix(self.session.tokens(), &job.prompt)
        };
        self.session.truncate(reuse);
        let prefilled = if job.prompt_logprobs {
            self.score_prompt(&job)
        } else {
            self.session
                .prefill(&job.prompt[reuse..])
                .and_then(|l| Ok(logits_slice(&l)?.to_vec()))
        };
        let logits = match prefilled {
            Ok(logits) => logits,
            Err(e) => {
                let _ = job.events.send(JobEvent::Failed(e.to_string()));
                self.session.reset();
                return Err(e);
            }
        };
        let step = self.activate(job, reuse, &logits)?;
        Ok((step, logits))
    }

    /// Runs an embedding job: its prompt from position 0, pooled and L2-normalised;
    /// sends the vector and the end. The slot is free again at once.
    fn embed(&mut self, job: Job, pooling: Pooling) -> Result<Step> {
        match self.session.embed(&job.prompt, pooling, true) {
            Ok(vector) => {
                let _ = job.events.send(JobEvent::Embedding(vector));
                let _ = job.events.send(JobEvent::Done {
                    reason: FinishReason::Length,
                    prompt_tokens: job.prompt.len(),
                    cached_tokens: 0,
                    completion_tokens: 0,
                });
                Ok(Step::Finished)
            }
            Err(e) => {
                let _ = job.events.send(JobEvent::Failed(e.to_string()));
                self.session.reset();
                Err(e)
            }
        }
    }

    /// Starts `job` from `source`, a session that holds its prompt (the group's first
    /// job prefilled it and `logits` are its last position's): the prompt's keys and
    /// values are copied, nothing runs, and the first token is sampled with this job's
    /// own sampler.
    pub(crate) fn fork(&mut self, job: Job, source: &Session, logits: &[f32]) -> Result<Step> {
        if let Err(e) = self.session.fork_from(source, job.prompt.len()) {
            let _ = job.events.send(JobEvent::Failed(e.to_string()));
            return Err(e);
        }
        // Its prompt came from the group's prefill, not from this slot's cache.
        self.activate(job, 0, logits)
    }

    /// Makes `job` this slot's, its prompt in the session, and samples its first token
    /// from `logits` (a scoring-only job ends here).
    fn activate(&mut self, mut job: Job, cached_tokens: usize, logits: &[f32]) -> Result<Step> {
        let active = Active {
            sampler: Sampler::new(job.sampler.clone()),
            decoder: TokenStreamDecoder::new(DetokenizeOptions {
                render_special: false,
                strip_leading_space: false,
            }),
            stop: StopText::new(job.stop.clone()),
            constraint: job.constraint.take(),
            cached_tokens,
            produced: 0,
            pending: Vec::new(),
            next_token: None,
            job,
        };
        let score_only = active.job.max_tokens == 0;
        self.active = Some(active);
        if score_only {
            return Ok(self.finish(FinishReason::Length));
        }
        self.accept_logits(logits)
    }

    /// Runs the whole prompt of `job` with every position's logits, sends the
    /// log-probabilities of its tokens after the first, and returns the last
    /// position's logits.
    fn score_prompt(&mut self, job: &Job) -> Result<Vec<f32>> {
        let top = job.logprobs.unwrap_or(0);
        let vocab = self.session.model().config().vocab_size.max(1);
        let rows = (PROMPT_SCORING_FLOATS / vocab).max(1);
        let mut entries = Vec::with_capacity(job.prompt.len().saturating_sub(1));
        let mut last = Vec::new();
        let mut position = 0;
        for chunk in job.prompt.chunks(rows) {
            let logits = self.session.logits_all(chunk)?;
            let values = logits_slice(&logits)?;
            for row in values.chunks_exact(vocab) {
                position += 1;
                match job.prompt.get(position) {
                    Some(&next) => entries.push(token_logprobs(row, next, top)),
                    None => last = row.to_vec(),
                }
            }
        }
        let _ = job.events.send(JobEvent::PromptLogprobs(entries));
        Ok(last)
    }

    /// The running job's prompt and generated token counts.
    pub(crate) fn job_counts(&self) -> Option<(usize, usize)> {
        self.active
            .as_ref()
            .map(|a| (a.job.prompt.len(), a.produced))
    }

    /// Whether the job's client went away (its event channel is closed).
    pub(crate) fn client_gone(&self) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.job.events.is_closed())
    }

    /// Ends the job without a report (the client is gone).
    pub(crate) fn abandon(&mut self) {
        self.active = None;
    }

    /// Reports an engine failure and ends the job.
    pub(crate) fn fail(&mut self, what: String) {
        if let Some(active) = self.active.take() {
            let _ = active.job.events.send(JobEvent::Failed(what));
        }
    }

    /// Samples the next token from `logits` (the last position's) and emits its text.
    pub(crate) fn accept_logits(&mut self, logits: &[f32]) -> Result<Step> {
        let Some(active) = self.active.as_mut() else {
            return Ok(Step::Finished);
        };
        let remaining = active.job.max_tokens.saturating_sub(active.produced);
        let id = match active.constraint.as_mut() {
            None => active.sampler.sample(logits, self.session.tokens()),
            Some(c) => match c.next_token(
                &mut active.sampler,
                logits,
                self.session.tokens(),
                remaining,
            ) {
                Ok(Some(id)) => id,
                Ok(None) => return Ok(self.finish(FinishReason::EndOfGeneration)),
                Err(e) => return Ok(self.reject(e.to_string())),
            },
        };
        active.produced += 1;
        // The raw model's view of the token (before penalties, bias, grammar and
        // temperature).
        let entry = active
            .job
            .logprobs
            .map(|top| token_logprobs(logits, id, top));
        let vocab = self.session.model().vocab();
        // A grammar's end is the output's end, `ignore_eos` or not.
        let held = active
            .constraint
            .as_ref()
            .is_some_and(OutputConstraint::is_active);
        if (!active.job.ignore_eos || held) && vocab.is_eog(id) {
            return Ok(self.finish(FinishReason::EndOfGeneration));
        }
        let trie = &active.job.trie;
        let piece = if trie.preserved().binary_search(&id).is_ok() {
            active.decoder.push_bytes(trie.piece(id))
        } else {
            active.decoder.push(vocab, id)?
        };
        let released = active.stop.push(piece);
        active.pending.extend(entry);
        if !released.text.is_empty() {
            let event = JobEvent::Text {
                text: released.text,
                logprobs: std::mem::take(&mut active.pending),
            };
            if active.job.events.send(event).is_err() {
                self.abandon();
                return Ok(Step::ClientGone);
            }
        }
        if released.stopped {
            return Ok(self.finish(FinishReason::StopString));
        }
        if active.produced >= active.job.max_tokens {
            return Ok(self.finish(FinishReason::Length));
        }
        if self.session.len() >= self.session.capacity() {
            return Ok(self.finish(FinishReason::ContextFull));
        }
        active.next_token = Some(id);
        Ok(Step::Continue)
    }

    /// Reports that the request cannot go on and frees the slot.
    fn reject(&mut self, what: String) -> Step {
        if let Some(active) = self.active.take() {
            let _ = active.job.events.send(JobEvent::Invalid(what));
        }
        Step::Finished
    }

    /// Flushes held text, reports the end and frees the slot.
    fn finish(&mut self, mut reason: FinishReason) -> Step {
        let Some(mut active) = self.active.take() else {
            return Step::Finished;
        };
        if reason != FinishReason::StopString {
            let tail = active.decoder.finish().to_owned();
            let released = active.stop.push(&tail);
            let mut rest = released.text;
            if released.stopped {
                reason = FinishReason::StopString;
            } else {
                rest.push_str(&active.stop.finish());
            }
            if !rest.is_empty() || !active.pending.is_empty() {
                let _ = active.job.events.send(JobEvent::Text {
                    text: rest,
                    logprobs: std::mem::take(&mut active.pending),
                });
            }
        }
        let _ = active.job.events.send(JobEvent::Done {
            reason,
            prompt_tokens: active.job.prompt.len(),
            cached_tokens: active.cached_tokens,
            completion_tokens: active.produced,
        });
        Step::Finished
    }
}

#[cfg(test)]
mod tests {
    use super::common_prefix;

    #[test]
    fn common_prefix_lengths() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[], &[1]), 0);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 3]), 2);
    }
}
