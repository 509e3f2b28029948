//! `Slot`: one KV session of the server and the job it is running.

use crate::engine::{FinishReason, Pooling, Sampler, Session, TokenLogprob, token_logprobs};
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
    /// A job whose prompt runs in chunks, before it becomes [`Slot::active`].
    prefill: Option<Prefill>,
}

/// A job whose prompt is going into the session chunk by chunk (the scheduler's mixed
/// steps).
#[derive(Debug)]
struct Prefill {
    job: Job,
    /// The group's other jobs, forked from this slot once the prompt is in.
    forks: Vec<Job>,
    /// The prompt tokens kept from the session's cache.
    reused: usize,
    /// When the job was admitted (the scheduler runs prompts in that order).
    admitted: u64,
    /// For a prompt scored for its log-probabilities: those of its tokens so far.
    scored: Option<Vec<TokenLogprob>>,
}

/// A prompt whose last chunk ran: the job is active and its first token sampled.
#[derive(Debug)]
pub(crate) struct Prefilled {
    /// What became of the job after its first token (on an error the job is still
    /// active: the caller ends it with [`Slot::fail`]).
    pub(crate) step: Result<Step>,
    /// The group's other jobs, to fork from this slot.
    pub(crate) forks: Vec<Job>,
    /// Whether the job generates (its first token counts as a completion token).
    pub(crate) generates: bool,
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
            prefill: None,
        }
    }

    /// Whether the slot has no job, running or prefilling.
    pub(crate) fn is_idle(&self) -> bool {
        self.active.is_none() && self.prefill.is_none()
    }

    /// Starts `job` (not an embedding: those run whole, [`Slot::embed`]) with `forks` to
    /// follow: keeps the cached prefix it shares with the prompt (at least one prompt
    /// token always runs, for the logits); the rest runs through
    /// [`Slot::pending_prompt`] and [`Slot::prefilled`]. A prompt scored for its
    /// log-probabilities runs from position 0. Returns the prompt tokens kept.
    pub(crate) fn begin(&mut self, job: Job, forks: Vec<Job>, admitted: u64) -> usize {
        let (reused, scored) = if job.prompt_logprobs {
            let entries = Vec::with_capacity(job.prompt.len().saturating_sub(1));
            (0, Some(entries))
        } else {
            (reusable_prefix(self.session.tokens(), &job.prompt), None)
        };
        self.session.truncate(reused);
        self.prefill = Some(Prefill {
            job,
            forks,
            reused,
            admitted,
            scored,
        });
        reused
    }

    /// The prompt tokens still to run and when the job was admitted, while the slot
    /// prefills.
    pub(crate) fn pending_prompt(&self) -> Option<(&[u32], u64)> {
        let p = self.prefill.as_ref()?;
        let done = self.session.len().min(p.job.prompt.len());
        Some((&p.job.prompt[done..], p.admitted))
    }

    /// Whether the prompt going in is scored: its chunks need every token's logits
    /// ([`Slot::prefilled`]).
    pub(crate) fn is_scoring(&self) -> bool {
        self.prefill.as_ref().is_some_and(|p| p.scored.is_some())
    }

    /// The jobs waiting to fork from this slot once its prompt is in.
    pub(crate) fn waiting_forks(&self) -> usize {
        self.prefill.as_ref().map_or(0, |p| p.forks.len())
    }

    /// A chunk of the prompt ran (the session holds it) and `logits` are its rows: the
    /// last token's, or for a scored prompt every token's, whose log-probabilities of
    /// the tokens they predict are kept. Once the whole prompt is in, a scored prompt's
    /// log-probabilities are sent and the job becomes active with its first token
    /// sampled from the last row. `None` while the prompt goes on.
    pub(crate) fn prefilled(&mut self, logits: &[f32]) -> Option<Prefilled> {
        let p = self.prefill.as_mut()?;
        if let Some(entries) = p.scored.as_mut() {
            let vocab = self.session.model().config().vocab_size.max(1);
            let start = self.session.len().saturating_sub(logits.len() / vocab);
            let top = p.job.logprobs.unwrap_or(0);
            for (j, row) in logits.chunks_exact(vocab).enumerate() {
                if let Some(&next) = p.job.prompt.get(start + j + 1) {
                    entries.push(token_logprobs(row, next, top));
                }
            }
        }
        if self.session.len() < p.job.prompt.len() {
            return None;
        }
        let Prefill {
            job,
            forks,
            reused,
            scored,
            ..
        } = self.prefill.take()?;
        if let Some(entries) = scored {
            let _ = job.events.send(JobEvent::PromptLogprobs(entries));
        }
        let generates = job.max_tokens > 0;
        let vocab = self.session.model().config().vocab_size.max(1);
        let last = &logits[logits.len().saturating_sub(vocab)..];
        let step = self.activate(job, reused, last);
        Some(Prefilled {
            step,
            forks,
            generates,
        })
    }

    /// Ends a prefilling job and its forks with `what` (an engine failure); returns how
    /// many jobs ended.
    pub(crate) fn fail_prefill(&mut self, what: &str) -> usize {
        let Some(p) = self.prefill.take() else {
            return 0;
        };
        let _ = p.job.events.send(JobEvent::Failed(what.to_owned()));
        for fork in &p.forks {
            let _ = fork.events.send(JobEvent::Failed(what.to_owned()));
        }
        self.session.reset();
        1 + p.forks.len()
    }

    /// Runs an embedding job whole: its prompt from position 0, pooled and L2-normalised; sends the vector and the end.
    /// The slot is free again at once.
    pub(crate) fn embed(&mut self, job: Job, pooling: Pooling) -> Result<Step> {
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

    /// The running (or prefilling) job's prompt and generated token counts.
    pub(crate) fn job_counts(&self) -> Option<(usize, usize)> {
        let prefilling = self.prefill.as_ref().map(|p| (p.job.prompt.len(), 0));
        self.active
            .as_ref()
            .map(|a| (a.job.prompt.len(), a.produced))
            .or(prefilling)
    }

    /// Whether the job's client went away (its event channel is closed).
    pub(crate) fn client_gone(&self) -> bool {
        let running = self
            .active
            .as_ref()
            .is_some_and(|a| a.job.events.is_closed());
        let prefilling = self
            .prefill
            .as_ref()
            .is_some_and(|p| p.job.events.is_closed());
        running || prefilling
    }

    /// Ends the job without a report (the client is gone); returns how many jobs ended
    /// (a prefilling job's forks with it).
    pub(crate) fn abandon(&mut self) -> usize {
        self.active = None;
        self.prefill.take().map_or(1, |p| 1 + p.forks.len())
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
                let _ = self.abandon();
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
