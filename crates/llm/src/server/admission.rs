//! `Admission`: the bounded queue between the HTTP handlers and the engine thread.
//!
//! A request asks for one slot per choice: its prompts (completions may give several),
//! each with `n` continuations. It is admitted while the busy slots plus the slots the
//! waiting requests ask for stay within the slots plus the queue length; otherwise the
//! handler answers 429 at once. The engine thread takes a prompt's continuations
//! together (they share its prefill) when that many slots are free, in arrival order. A
//! queued request holds its place through a [`QueuePlace`]: when the handler drops it
//! (the client disconnected) what still waits leaves the queue at once, so dead waiters
//! never cost live clients a 429.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use crate::engine::{FinishReason, Pooling, SamplerConfig, TokenLogprob};
use crate::grammar::{OutputConstraint, TokenTrie};
use crate::server::metrics::Metrics;

/// What a job asks the engine for.
#[derive(Debug)]
pub(crate) struct Job {
    /// The prompt tokens (at least one, shorter than the context).
    pub(crate) prompt: Vec<u32>,
    /// Sampling settings.
    pub(crate) sampler: SamplerConfig,
    /// The most tokens to generate.
    pub(crate) max_tokens: usize,
    /// Stop before any of these strings.
    pub(crate) stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub(crate) ignore_eos: bool,
    /// Report each generated token's log-probability with this many alternatives.
    pub(crate) logprobs: Option<usize>,
    /// Report the prompt tokens' log-probabilities too (an echoed prompt): the whole
    /// prompt runs, none of it from the slot's cache.
    pub(crate) prompt_logprobs: bool,
    /// An embedding job: the prompt's pooled hidden states, no generation.
    pub(crate) embed: Option<Pooling>,
    /// The grammar the output is held to, if any.
    pub(crate) constraint: Option<OutputConstraint>,
    /// The vocabulary's pieces: tokens it preserves (tool-call markers) render as text.
    pub(crate) trie: Arc<TokenTrie>,
    /// Where the engine sends the text and the end.
    pub(crate) events: ChoiceSender,
}

/// Where the engine sends one choice's events: the request's channel, each event tagged
/// with the choice's index.
#[derive(Clone, Debug)]
pub(crate) struct ChoiceSender {
    index: usize,
    tx: UnboundedSender<(usize, JobEvent)>,
}

impl ChoiceSender {
    /// Choice `index`'s sender on `tx`.
    pub(crate) fn new(index: usize, tx: UnboundedSender<(usize, JobEvent)>) -> ChoiceSender {
        ChoiceSender { index, tx }
    }

    /// Sends `event`; an error when the client is gone.
    pub(crate) fn send(&self, event: JobEvent) -> Result<(), JobEvent> {
        self.tx.send((self.index, event)).map_err(|e| e.0.1)
    }

    /// Whether the client is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The continuations of one prompt: run together, the first prefills and the others
/// fork its KV cache.
pub(crate) type Group = Vec<Job>;

/// What the engine sends back for a job.
#[derive(Debug)]
pub(crate) enum JobEvent {
    /// Generated text and the log-probabilities of the tokens it completes (when the
    /// job asked for them); never both empty.
    Text {
        /// The text.
        text: String,
        /// One entry per token.
        logprobs: Vec<TokenLogprob>,
    },
    /// The log-probabilities of the prompt's tokens after the first (sent before any
    /// text, when the job asked for them).
    PromptLogprobs(Vec<TokenLogprob>),
    /// An embedding job's vector (unit length), before its `Done`.
    Embedding(Vec<f32>),
    /// The generation ended.
    Done {
        /// Why.
        reason: FinishReason,
        /// Prompt tokens.
        prompt_tokens: usize,
        /// Prompt tokens reused from the slot's cache.
        cached_tokens: usize,
        /// Generated tokens.
        completion_tokens: usize,
    },
    /// The engine failed on this job.
    Failed(String),
    /// The request cannot go on (its grammar is too ambiguous): a client error.
    Invalid(String),
}

/// Queue counts at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Occupancy {
    /// Slots running a job.
    pub(crate) busy: usize,
    /// Jobs (one per choice) waiting for a slot.
    pub(crate) waiting: usize,
}

#[derive(Debug, Default)]
struct State {
    /// Waiting requests with their tickets: the groups not started yet.
    waiting: VecDeque<(u64, VecDeque<Group>)>,
    /// Jobs in `waiting`.
    waiting_jobs: usize,
    busy: usize,
    next_ticket: u64,
    /// New jobs are refused (the server is draining); the engine still runs.
    refusing: bool,
    closed: bool,
}

/// The bounded job queue and the count of busy slots, under one lock.
#[derive(Debug)]
pub(crate) struct Admission {
    state: Mutex<State>,
    wake: Condvar,
    slots: usize,
    queue: usize,
    metrics: Arc<Metrics>,
}

/// A submitted job's claim on the queue: dropping it while the job still waits takes the
/// job out of the queue (and counts it cancelled); once the engine took the job it does
/// nothing (the engine sees the closed channel instead).
#[derive(Debug)]
pub(crate) struct QueuePlace {
    admission: Arc<Admission>,
    ticket: u64,
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        if self.admission.withdraw(self.ticket) {
            self.admission
                .metrics
                .cancelled_requests
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Why a job was not admitted.
#[derive(Debug)]
pub(crate) enum Rejected {
    /// Every slot is busy and the queue is full.
    Full {
        /// The slots.
        slots: usize,
        /// The queue length.
        queue: usize,
    },
    /// The server is shutting down.
    Closed,
}

impl Admission {
    /// A queue for `slots` slots and `queue` waiting jobs; withdrawn jobs are counted in
    /// `metrics`.
    pub(crate) fn new(slots: usize, queue: usize, metrics: Arc<Metrics>) -> Admission {
        Admission {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            slots,
            queue,
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counts half-updated (each
        // critical section is one push, pop or add), so a poisoned lock is still sound.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most jobs one request may ask for: the slots plus the queue.
    pub(crate) fn capacity(&self) -> usize {
        self.slots + self.queue
    }

    /// Queues a request's `groups` (each at most [`Admission::capacity`] jobs and no
    /// wider than the slots, as the handler checks), or says why not. Keep the
    /// returned place for as long as the client waits for the jobs.
    pub(crate) fn submit(self: &Arc<Self>, groups: Vec<Group>) -> Result<QueuePlace, Rejected> {
        let jobs: usize = groups.iter().map(Vec::len).sum();
        let mut state = self.lock();
        if state.closed || state.refusing {
            return Err(Rejected::Closed);
        }
        if state.busy + state.waiting_jobs + jobs > self.slots + self.queue {
            return Err(Rejected::Full {
                slots: self.slots,
                queue: self.queue,
            });
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push_back((ticket, groups.into()));
        state.waiting_jobs += jobs;
        drop(state);
        self.wake.notify_one();
        Ok(QueuePlace {
            admission: Arc::clone(self),
            ticket,
        })
    }

    /// Takes what still waits of `ticket`'s request out of the queue; returns whether
    /// anything did.
    fn withdraw(&self, ticket: u64) -> bool {
        let mut state = self.lock();
        match state.waiting.iter().position(|(t, _)| *t == ticket) {
            Some(i) => {
                if let Some((_, groups)) = state.waiting.remove(i) {
                    state.waiting_jobs -= groups.iter().map(Vec::len).sum::<usize>();
                }
                true
            }
            None => false,
        }
    }

    /// The next waiting group if it fits in `free` slots, its jobs counted busy from
    /// now; `None` when none waits or the next needs more slots (it keeps its turn).
    pub(crate) fn take(&self, free: usize) -> Option<Group> {
        let mut state = self.lock();
        let (_, groups) = state.waiting.front_mut()?;
        if groups.front().is_none_or(|g| g.len() > free) {
            return None;
        }
        let group = groups.pop_front()?;
        if groups.is_empty() {
            state.waiting.pop_front();
        }
        state.waiting_jobs -= group.len();
        state.busy += group.len();
        Some(group)
    }

    /// Blocks until a job waits or the queue closes (or `timeout` passes); returns false
    /// once closed.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let state = self.lock();
        if state.closed {
            return false;
        }
        if !state.waiting.is_empty() {
            return true;
        }
        let (state, _) = self
            .wake
            .wait_timeout(state, timeout)
            .unwrap_or_else(|e| e.into_inner());
        !state.closed
    }

    /// A slot finished its job.
    pub(crate) fn release(&self) {
        let mut state = self.lock();
        state.busy = state.busy.saturating_sub(1);
    }

    /// Refuses new jobs from now on (shutting down); waiting and running jobs go on.
    pub(crate) fn refuse_new(&self) {
        self.lock().refusing = true;
    }

    /// Refuses new jobs, drops the waiting ones (their clients see the stream end) and
    /// wakes the engine thread.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.waiting.clear();
        state.waiting_jobs = 0;
        drop(state);
        self.wake.notify_all();
    }

    /// Whether new jobs are refused ([`Admission::refuse_new`] or
    /// [`Admission::close`] was called): the server is draining.
    pub(crate) fn is_refusing(&self) -> bool {
        let state = self.lock();
        state.refusing || state.closed
    }

    /// The slots.
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// Whether [`Admission::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Busy slots and waiting jobs now.
    pub(crate) fn occupancy(&self) -> Occupancy {
        let state = self.lock();
        Occupancy {
            busy: state.busy,
            waiting: state.waiting_jobs,
        }
    }
}
