//! `Slot`: one KV session of the server and the job it is running.

use crate::engine::{FinishReason, Sampler, Session, logits_slice};
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
        }
    }

    /// Starts `job`: keeps the cached prefix it shares with the prompt (at least one
    /// prompt token always runs, for the logits), prefills the rest and samples the first
    /// token.
    pub(crate) fn start(&mut self, mut job: Job) -> Result<Step> {
        let reuse = reusable_prefix(self.session.tokens(), &job.prompt);
        self.session.truncate(reuse);
        let logits = match self.session.prefill(&job.prompt[reuse..]) {
            Ok(logits) => logits,
            Err(e) => {
                let _ = job.events.send(JobEvent::Failed(e.to_string()));
                self.session.reset();
                return Err(e);
            }
        };
        let active = Active {
            sampler: Sampler::new(job.sampler.clone()),
            decoder: TokenStreamDecoder::new(DetokenizeOptions {
                render_special: false,
                strip_leading_space: false,
            }),
            stop: StopText::new(job.stop.clone()),
            constraint: job.constraint.take(),
            cached_tokens: reuse,
            produced: 0,
            next_token: None,
            job,
        };
        self.active = Some(active);
        let values = logits_slice(&logits)?;
        self.accept_logits(values)
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
        if !released.text.is_empty()
            && active
                .job
                .events
                .send(JobEvent::Text(released.text))
                .is_err()
        {
            self.abandon();
            return Ok(Step::ClientGone);
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
            if !rest.is_empty() {
                let _ = active.job.events.send(JobEvent::Text(rest));
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
