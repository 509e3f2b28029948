//! `Scheduler`: the engine thread. It owns the slots, admits waiting jobs into free
//! slots (prefilling their prompts, reusing each slot's cached prefix), and runs one
//! batched decode step per iteration for every active slot (continuous batching: a job
//! joins or leaves the batch between steps).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::{Session, logits_slice, step_batch};
use crate::server::admission::{Admission, Group, Job, JobEvent};
use crate::server::metrics::{Metrics, add_duration};
use crate::server::slot::{Slot, Step, common_prefix, reusable_prefix};
use crate::server::slot_board::SlotBoard;

/// How long an idle engine thread sleeps between checks for shutdown.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// The engine loop's state.
#[derive(Debug)]
pub(crate) struct Scheduler {
    slots: Vec<Slot>,
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    board: Arc<SlotBoard>,
}

impl Scheduler {
    /// A scheduler over `sessions` (one slot each), reporting them on `board`.
    pub(crate) fn new(
        sessions: Vec<Session>,
        admission: Arc<Admission>,
        metrics: Arc<Metrics>,
        board: Arc<SlotBoard>,
    ) -> Scheduler {
        Scheduler {
            slots: sessions.into_iter().map(Slot::new).collect(),
            admission,
            metrics,
            board,
        }
    }

    /// Writes every slot's state on the board.
    fn report(&self) {
        for (i, slot) in self.slots.iter().enumerate() {
            self.board.record(i, slot);
        }
    }

    /// Runs until the admission queue closes.
    pub(crate) fn run(mut self) {
        while !self.admission.is_closed() {
            self.drop_gone_clients();
            self.admit();
            self.report();
            let decoded = self.decode_step();
            self.report();
            if !decoded && !self.admission.wait(IDLE_WAIT) {
                break;
            }
        }
    }

    /// Frees the slots whose clients disconnected.
    fn drop_gone_clients(&mut self) {
        for slot in &mut self.slots {
            if slot.client_gone() {
                slot.abandon();
                self.admission.release();
                self.metrics
                    .cancelled_requests
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Starts waiting groups while they fit in the free slots.
    fn admit(&mut self) {
        loop {
            let free = self.slots.iter().filter(|s| s.active.is_none()).count();
            if free == 0 {
                return;
            }
            let Some(group) = self.admission.take(free) else {
                return;
            };
            self.start_group(group);
        }
    }

    /// Frees the slot counted for a job that will not run (its client left while it
    /// waited).
    fn cancel(&self) {
        self.admission.release();
        self.metrics
            .cancelled_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Runs a group: its first job prefilled on the free slot sharing the longest cached
    /// prefix with the prompt, the others forked from that slot's KV cache onto free
    /// slots (the admission counted one slot per job).
    fn start_group(&mut self, group: Group) {
        let mut jobs = group.into_iter();
        let Some(first) = jobs.next() else {
            return;
        };
        if first.events.is_closed() {
            // The client left while the jobs waited (they share its channel).
            self.cancel();
            jobs.for_each(|_| self.cancel());
            return;
        }
        let Some((source, logits)) = self.start(first) else {
            // The prefill failed and was reported: the forks fail with it.
            for job in jobs {
                let _ = job
                    .events
                    .send(JobEvent::Failed("the prompt's prefill failed".into()));
                self.metrics.failed_requests.fetch_add(1, Ordering::Relaxed);
                self.admission.release();
            }
            return;
        };
        for job in jobs {
            let target = self
                .slots
                .iter()
                .enumerate()
                .position(|(i, s)| i != source && s.active.is_none());
            let Some(target) = target else {
                // Not reached: the admission took the group for as many free slots.
                self.cancel();
                continue;
            };
            let (from, to) = pair_mut(&mut self.slots, source, target);
            match to.fork(job, &from.session, &logits) {
                Ok(step) => {
                    self.metrics
                        .completion_tokens
                        .fetch_add(1, Ordering::Relaxed);
                    self.settle(step);
                }
                Err(_) => {
                    self.metrics.failed_requests.fetch_add(1, Ordering::Relaxed);
                    self.admission.release();
                }
            }
        }
    }

    /// Runs `job` on the free slot sharing the longest cached prefix with its prompt;
    /// returns that slot and the prompt's last logits, or `None` when the prefill failed
    /// (reported on the job's channel).
    fn start(&mut self, job: Job) -> Option<(usize, Vec<f32>)> {
        let Some(index) = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.active.is_none())
            .max_by_key(|(i, s)| {
                (
                    common_prefix(s.session.tokens(), &job.prompt),
                    usize::MAX - i,
                )
            })
            .map(|(i, _)| i)
        else {
            // Not reached: `admit` takes a group only while its slots are free.
            self.admission.release();
            return None;
        };
        let prompt_tokens = job.prompt.len() as u64;
        let job_generates = job.embed.is_none() && job.max_tokens > 0;
        let slot = &mut self.slots[index];
        // A scored prompt or an embedding runs whole (see `Slot::start`).
        let cached = if job.prompt_logprobs || job.embed.is_some() {
            0
        } else {
            reusable_prefix(slot.session.tokens(), &job.prompt) as u64
        };
        let began = Instant::now();
        let result = slot.start(job);
        add_duration(&self.metrics.prefill_nanos, began.elapsed());
        let m = &self.metrics;
        m.prompt_tokens.fetch_add(prompt_tokens, Ordering::Relaxed);
        m.cached_prompt_tokens.fetch_add(cached, Ordering::Relaxed);
        match result {
            Ok((step, logits)) => {
                if job_generates {
                    m.completion_tokens.fetch_add(1, Ordering::Relaxed);
                }
                self.settle(step);
                Some((index, logits))
            }
            Err(e) => {
                // Reported on the job's channel unless the failure came after the prefill.
                slot.fail(e.to_string());
                slot.session.reset();
                self.metrics.failed_requests.fetch_add(1, Ordering::Relaxed);
                self.admission.release();
                None
            }
        }
    }

    /// Frees the slot of a job that ended or whose client went away.
    fn settle(&self, step: Step) {
        match step {
            Step::Continue => {}
            Step::Finished => self.admission.release(),
            Step::ClientGone => {
                self.admission.release();
                self.metrics
                    .cancelled_requests
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// One batched decode step over every slot with a token to run; returns whether
    /// there was any.
    fn decode_step(&mut self) -> bool {
        let mut rows = Vec::with_capacity(self.slots.len());
        let mut tokens = Vec::with_capacity(self.slots.len());
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(token) = slot.active.as_mut().and_then(|a| a.next_token.take()) {
                rows.push(i);
                tokens.push(token);
            }
        }
        if rows.is_empty() {
            return false;
        }
        let began = Instant::now();
        let mut sessions: Vec<&mut Session> = self
            .slots
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| rows.contains(i))
            .map(|(_, s)| &mut s.session)
            .collect();
        let result = step_batch(&mut sessions, &tokens);
        drop(sessions);
        add_duration(&self.metrics.decode_nanos, began.elapsed());
        self.metrics.decode_steps.fetch_add(1, Ordering::Relaxed);
        self.metrics
            .decode_tokens
            .fetch_add(rows.len() as u64, Ordering::Relaxed);
        let failure = match &result {
            Ok(logits) => match logits_slice(logits) {
                Ok(values) => {
                    let vocab = values.len() / rows.len();
                    for (r, &i) in rows.iter().enumerate() {
                        let row = &values[r * vocab..(r + 1) * vocab];
                        self.metrics
                            .completion_tokens
                            .fetch_add(1, Ordering::Relaxed);
                        match self.slots[i].accept_logits(row) {
                            Ok(step) => self.settle(step),
                            Err(e) => {
                                self.slots[i].fail(e.to_string());
                                self.metrics.failed_requests.fetch_add(1, Ordering::Relaxed);
                                self.admission.release();
                            }
                        }
                    }
                    None
                }
                Err(e) => Some(e.to_string()),
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(what) = failure {
            for &i in &rows {
                self.slots[i].fail(what.clone());
                self.slots[i].session.reset();
                self.metrics.failed_requests.fetch_add(1, Ordering::Relaxed);
                self.admission.release();
            }
        }
        true
    }
}

/// Slot `a` to read and slot `b` to write (`a != b`).
fn pair_mut(slots: &mut [Slot], a: usize, b: usize) -> (&Slot, &mut Slot) {
    if a < b {
        let (left, right) = slots.split_at_mut(b);
        (&left[a], &mut right[0])
    } else {
        let (left, right) = slots.split_at_mut(a);
        (&right[0], &mut left[b])
    }
}
