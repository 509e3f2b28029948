//! `Scheduler`: the engine thread. It owns the slots, admits waiting jobs into free slots
//! (reusing each slot's cached prefix), and runs one mixed step per iteration: a decode
//! row for every generating slot and chunks of the prompts still going in, as many
//! prompt tokens as the [`ChunkPacer`] allows (continuous batching with chunked
//! prefill: a job joins or leaves the batch between steps, and decode never waits for a
//! whole prompt). A scored prompt's chunk brings every token's logits back
//! ([`step_spans_rows`]); embeddings run whole.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::{Session, logits_slice, step_spans_rows};
use crate::error::Result;
use crate::server::admission::{Admission, Group, Job, JobEvent};
use crate::server::chunk_pacer::{ChunkPacer, MIN_CHUNK};
use crate::server::metrics::{Metrics, add_duration};
use crate::server::slot::{Prefilled, Slot, Step, common_prefix};
use crate::server::slot_board::SlotBoard;

/// How long an idle engine thread sleeps between checks for shutdown.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// The most logits values one step brings to the host for a scored prompt's chunk.
const SCORED_LOGITS: usize = 1 << 22;

/// What a slot runs in a step.
#[derive(Clone, Copy, Debug)]
enum Part {
    /// Its sampled token (a decode row).
    Decode(u32),
    /// The next `n` tokens of its prompt.
    Prompt(usize),
    /// The next `n` tokens of its scored prompt (a logits row for each).
    Scored(usize),
}

impl Part {
    /// The tokens the part runs.
    fn tokens(self) -> usize {
        match self {
            Part::Decode(_) => 1,
            Part::Prompt(n) | Part::Scored(n) => n,
        }
    }

    /// The logits rows the step brings back for it.
    fn logit_rows(self) -> usize {
        match self {
            Part::Scored(n) => n,
            _ => 1,
        }
    }
}

/// The engine loop's state.
#[derive(Debug)]
pub(crate) struct Scheduler {
    slots: Vec<Slot>,
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    board: Arc<SlotBoard>,
    pacer: ChunkPacer,
    /// Tokens one step holds.
    max_tokens: usize,
    /// Logits rows a step may bring back (a scored prompt's chunk brings one per token).
    max_logit_rows: usize,
    /// Jobs admitted so far (their order of admission orders their prompts).
    admitted: u64,
    /// The slot the next step's decode rows start from (when there are more generating
    /// slots than a step holds, they take turns).
    turn: usize,
    /// The step's parts, by slot (reused across steps).
    parts: Vec<(usize, Part)>,
    /// The step's tokens (reused across steps).
    tokens: Vec<u32>,
}

impl Scheduler {
    /// A scheduler over `sessions` (one slot each), reporting them on `board`, its
    /// mixed steps paced to `gap` decode-only steps (see [`ChunkPacer`]).
    pub(crate) fn new(
        sessions: Vec<Session>,
        admission: Arc<Admission>,
        metrics: Arc<Metrics>,
        board: Arc<SlotBoard>,
        gap: f64,
    ) -> Scheduler {
        let (max_tokens, max_logit_rows) = sessions.first().map_or((1, 1), |s| {
            let capacity = s.model().executor().arena_capacity();
            let vocab = s.model().config().vocab_size.max(1);
            // The arena's rows, or more for a scored prompt's chunk (its logits then come
            // from the pool), up to `SCORED_LOGITS` values.
            (
                capacity.max_batch_tokens.max(1),
                capacity.max_logit_rows.max(SCORED_LOGITS / vocab).max(1),
            )
        });
        Scheduler {
            slots: sessions.into_iter().map(Slot::new).collect(),
            admission,
            metrics,
            board,
            pacer: ChunkPacer::new(max_tokens, gap),
            max_tokens,
            max_logit_rows,
            admitted: 0,
            turn: 0,
            parts: Vec::new(),
            tokens: Vec::new(),
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
            let stepped = self.step();
            self.report();
            if !stepped && !self.admission.wait(IDLE_WAIT) {
                break;
            }
        }
    }

    /// Frees the slots whose clients disconnected.
    fn drop_gone_clients(&mut self) {
        for slot in &mut self.slots {
            if slot.client_gone() {
                for _ in 0..slot.abandon() {
                    self.admission.release();
                    self.metrics
                        .cancelled_requests
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Starts waiting groups while they fit in the free slots (less those held for the
    /// forks of groups still prefilling).
    fn admit(&mut self) {
        loop {
            let idle = self.slots.iter().filter(|s| s.is_idle()).count();
            let held: usize = self.slots.iter().map(Slot::waiting_forks).sum();
            let free = idle.saturating_sub(held);
            if free == 0 {
                return;
            }
            let Some(group) = self.admission.take(free) else {
                return;
            };
            self.start_group(group);
        }
    }

    /// Frees the slot counted for a job that will not run.
    fn cancel(&self) {
        self.admission.release();
        self.metrics
            .cancelled_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Frees the slot counted for a job that failed.
    fn failed(&self) {
        self.admission.release();
        self.metrics.failed_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The idle slot sharing the longest cached prefix with `prompt` (the first of
    /// equals).
    fn best_slot(&self, prompt: &[u32]) -> Option<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_idle())
            .max_by_key(|(i, s)| (common_prefix(s.session.tokens(), prompt), usize::MAX - i))
            .map(|(i, _)| i)
    }

    /// Runs a group: its first job on the idle slot sharing the longest cached prefix
    /// with the prompt, its prompt in chunks through the next steps (or whole, for a
    /// scored prompt or an embedding); the others are forked from that slot's KV cache
    /// onto idle slots once the prompt is in (the admission counted one slot per job).
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
        let Some(index) = self.best_slot(&first.prompt) else {
            // Not reached: `admit` takes a group only while its slots are free.
            self.admission.release();
            jobs.for_each(|_| self.admission.release());
            return;
        };
        let m = &self.metrics;
        m.prompt_tokens
            .fetch_add(first.prompt.len() as u64, Ordering::Relaxed);
        // A prompt to generate from or score goes in by chunks; an embedding runs whole.
        let Some(pooling) = first.embed else {
            self.admitted += 1;
            let reused = self.slots[index].begin(first, jobs.collect(), self.admitted);
            m.cached_prompt_tokens
                .fetch_add(reused as u64, Ordering::Relaxed);
            return;
        };
        let began = Instant::now();
        let result = self.slots[index].embed(first, pooling);
        add_duration(&self.metrics.prefill_nanos, began.elapsed());
        match result {
            Ok(step) => {
                self.settle(step);
                self.fork_group(index, jobs.collect(), &[]);
            }
            Err(_) => {
                // Reported on the job's channel.
                self.failed();
                self.fail_forks(jobs.collect());
            }
        }
    }

    /// A prompt whose last chunk ran on slot `i` (`logits` its last position's): counts
    /// its first token, forks the group's other jobs from it (or fails them with it), and
    /// returns what became of the job.
    fn prompt_done(&mut self, i: usize, prefilled: Prefilled, logits: &[f32]) -> Result<Step> {
        let Prefilled {
            step,
            forks,
            generates,
        } = prefilled;
        if step.is_ok() {
            if generates {
                self.metrics
                    .completion_tokens
                    .fetch_add(1, Ordering::Relaxed);
            }
            self.fork_group(i, forks, logits);
        } else {
            self.fail_forks(forks);
        }
        step
    }

    /// Reports the failure of the prefill the `forks` were waiting on.
    fn fail_forks(&self, forks: Vec<Job>) {
        for job in forks {
            let _ = job
                .events
                .send(JobEvent::Failed("the prompt's prefill failed".into()));
            self.failed();
        }
    }

    /// Starts each of `forks` on an idle slot from slot `source`, which holds their
    /// prompt with `logits` its last position's.
    fn fork_group(&mut self, source: usize, forks: Vec<Job>, logits: &[f32]) {
        for job in forks {
            let target = self
                .slots
                .iter()
                .enumerate()
                .position(|(i, s)| i != source && s.is_idle());
            let Some(target) = target else {
                // Not reached: the admission took the group for as many free slots,
                // and `admit` holds them while the prompt goes in.
                self.cancel();
                continue;
            };
            let (from, to) = pair_mut(&mut self.slots, source, target);
            match to.fork(job, &from.session, logits) {
                Ok(step) => {
                    self.metrics
                        .completion_tokens
                        .fetch_add(1, Ordering::Relaxed);
                    self.settle(step);
                }
                Err(_) => self.failed(),
            }
        }
    }

    /// Frees the slot of a job that ended or whose client went away.
    fn settle(&self, step: Step) {
        match step {
            Step::Continue => {}
            Step::Finished => self.admission.release(),
            Step::ClientGone => self.cancel(),
        }
    }

    /// Picks the step's parts: a decode row for each generating slot (in turns when
    /// there are more than a step holds; while a prompt waits, [`MIN_CHUNK`] tokens of
    /// the step are kept for it, so that it is never starved), then prompt chunks in
    /// order of admission, as many tokens as the pacer allows (a scored prompt's chunk
    /// also within the logits rows a step may bring back: one per token). Returns the
    /// decode rows, the prompt tokens and the pacer's budget.
    fn plan(&mut self) -> (usize, usize, usize) {
        self.parts.clear();
        let n = self.slots.len();
        let prompt_waiting = self.slots.iter().any(|s| s.pending_prompt().is_some());
        let max_rows = if prompt_waiting {
            self.max_tokens.saturating_sub(MIN_CHUNK).max(1)
        } else {
            self.max_tokens
        };
        for k in 0..n {
            if self.parts.len() == max_rows {
                break;
            }
            let i = (self.turn + k) % n;
            if let Some(token) = self.slots[i]
                .active
                .as_mut()
                .and_then(|a| a.next_token.take())
            {
                self.parts.push((i, Part::Decode(token)));
            }
        }
        self.turn = (self.turn + 1) % n.max(1);
        let decode_rows = self.parts.len();
        let allowed = self.pacer.budget(decode_rows);
        let mut budget = allowed;
        let mut prompts: Vec<(u64, usize, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.pending_prompt().map(|(p, at)| (at, i, p.len())))
            .collect();
        prompts.sort_unstable();
        let mut prompt_tokens = 0;
        let mut logit_rows = decode_rows;
        for (_, i, left) in prompts {
            let room = self.max_logit_rows.saturating_sub(logit_rows);
            if budget == 0 || room == 0 {
                break;
            }
            let part = if self.slots[i].is_scoring() {
                Part::Scored(left.min(budget).min(room))
            } else {
                Part::Prompt(left.min(budget))
            };
            self.parts.push((i, part));
            budget -= part.tokens();
            prompt_tokens += part.tokens();
            logit_rows += part.logit_rows();
        }
        // Sessions go to the engine in slot order.
        self.parts.sort_unstable_by_key(|&(i, _)| i);
        self.tokens.clear();
        for &(i, part) in &self.parts {
            match part {
                Part::Decode(token) => self.tokens.push(token),
                Part::Prompt(take) | Part::Scored(take) => {
                    if let Some((pending, _)) = self.slots[i].pending_prompt() {
                        self.tokens.extend_from_slice(&pending[..take]);
                    }
                }
            }
        }
        (decode_rows, prompt_tokens, allowed)
    }

    /// One mixed step over the planned parts; returns whether there was any.
    fn step(&mut self) -> bool {
        let (decode_rows, prompt_tokens, allowed) = self.plan();
        if self.parts.is_empty() {
            return false;
        }
        let began = Instant::now();
        let mut spans: Vec<&[u32]> = Vec::with_capacity(self.parts.len());
        let mut at = 0;
        for &(_, part) in &self.parts {
            spans.push(&self.tokens[at..at + part.tokens()]);
            at += part.tokens();
        }
        // Every row of a scored prompt's chunk (no flags, and no allocation, without one).
        let every_row: Vec<bool> = if self.parts.iter().any(|(_, p)| matches!(p, Part::Scored(_))) {
            self.parts
                .iter()
                .map(|(_, p)| matches!(p, Part::Scored(_)))
                .collect()
        } else {
            Vec::new()
        };
        let parts = &self.parts;
        let mut sessions: Vec<&mut Session> = self
            .slots
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| parts.iter().any(|(p, _)| p == i))
            .map(|(_, s)| &mut s.session)
            .collect();
        let result = step_spans_rows(&mut sessions, &spans, &every_row);
        drop((sessions, spans));
        let elapsed = began.elapsed();
        self.pacer
            .record(decode_rows, prompt_tokens, allowed, elapsed);
        self.count_step(decode_rows, prompt_tokens, elapsed);
        let failure = match &result {
            Ok(logits) => match logits_slice(logits) {
                Ok(values) => {
                    self.accept(values);
                    None
                }
                Err(e) => Some(e.to_string()),
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(what) = failure {
            self.fail_step(&what);
        }
        true
    }

    /// Adds a step's time and tokens to the metrics: its time split between decode and
    /// prefill by their tokens.
    fn count_step(&self, decode_rows: usize, prompt_tokens: usize, elapsed: Duration) {
        let m = &self.metrics;
        let all = (decode_rows + prompt_tokens).max(1) as f64;
        let decode = elapsed.mul_f64(decode_rows as f64 / all);
        if decode_rows > 0 {
            add_duration(&m.decode_nanos, decode);
            m.decode_steps.fetch_add(1, Ordering::Relaxed);
            m.decode_tokens
                .fetch_add(decode_rows as u64, Ordering::Relaxed);
        }
        if prompt_tokens > 0 {
            add_duration(&m.prefill_nanos, elapsed.saturating_sub(decode));
        }
    }

    /// Takes each part's logits (`values`: one row per part in order, a row per token of
    /// a scored chunk): a decode row samples its slot's next token; a prompt's last
    /// chunk makes its job active and forks the group's other jobs (a scored chunk's
    /// rows give its tokens' log-probabilities first).
    fn accept(&mut self, values: &[f32]) {
        let all_rows: usize = self.parts.iter().map(|(_, p)| p.logit_rows()).sum();
        let vocab = values.len() / all_rows.max(1);
        let parts = std::mem::take(&mut self.parts);
        let mut r = 0;
        for &(i, part) in &parts {
            let rows = &values[r * vocab..(r + part.logit_rows()) * vocab];
            r += part.logit_rows();
            let row = &rows[rows.len() - vocab..];
            let step = match part {
                Part::Decode(_) => {
                    self.metrics
                        .completion_tokens
                        .fetch_add(1, Ordering::Relaxed);
                    self.slots[i].accept_logits(row)
                }
                Part::Prompt(_) | Part::Scored(_) => {
                    let Some(prefilled) = self.slots[i].prefilled(rows) else {
                        continue;
                    };
                    self.prompt_done(i, prefilled, row)
                }
            };
            match step {
                Ok(step) => self.settle(step),
                Err(e) => {
                    self.slots[i].fail(e.to_string());
                    self.failed();
                }
            }
        }
        self.parts = parts;
    }

    /// Ends every job of the step's parts with the engine's failure `what`.
    fn fail_step(&mut self, what: &str) {
        let parts = std::mem::take(&mut self.parts);
        for &(i, part) in &parts {
            let slot = &mut self.slots[i];
            let ended = match part {
                Part::Decode(_) => {
                    slot.fail(what.to_owned());
                    slot.session.reset();
                    1
                }
                Part::Prompt(_) | Part::Scored(_) => slot.fail_prefill(what),
            };
            for _ in 0..ended {
                self.failed();
            }
        }
        self.parts = parts;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{LoadOptions, Model, SamplerConfig};
    use crate::grammar::TokenTrie;
    use crate::server::admission::ChoiceSender;
    use crate::testing::{ModelShape, RandomModelSpec, random_model};
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

    type Events = UnboundedReceiver<(usize, JobEvent)>;

    fn model() -> Arc<Model> {
        let shape = ModelShape::parse("dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300")
            .expect("shape");
        let file = random_model(&RandomModelSpec::llama(shape).with_seed(3)).expect("model");
        let options = LoadOptions {
            threads: Some(1),
            context_length: Some(512),
            ..LoadOptions::default()
        };
        Model::from_file(file, &options).expect("load")
    }

    fn job(model: &Model, prompt: Vec<u32>, max_tokens: usize) -> (Job, Events) {
        let (tx, rx) = unbounded_channel();
        let job = Job {
            prompt,
            sampler: SamplerConfig::greedy(),
            max_tokens,
            stop: Vec::new(),
            ignore_eos: true,
            logprobs: None,
            prompt_logprobs: false,
            embed: None,
            constraint: None,
            trie: Arc::new(TokenTrie::new(model.vocab(), &[])),
            events: ChoiceSender::new(0, tx),
        };
        (job, rx)
    }

    fn scheduler(model: &Arc<Model>, slots: usize) -> Scheduler {
        let metrics = Arc::new(Metrics::default());
        let sessions = (0..slots)
            .map(|_| model.session().expect("session"))
            .collect();
        let admission = Arc::new(Admission::new(slots, 4, Arc::clone(&metrics)));
        let board = Arc::new(SlotBoard::new(slots));
        Scheduler::new(sessions, admission, metrics, board, 2.0)
    }

    fn produced(s: &Scheduler, slot: usize) -> usize {
        s.slots[slot].job_counts().map_or(0, |(_, n)| n)
    }

    /// Two slots, a stream generating on slot 0 (its events and queue place returned
    /// to keep it alive), and pacer costs of a 10 ms decode-only step and 1 ms per
    /// prompt token (a first chunk of 10 tokens at a gap of 2).
    fn streaming(model: &Arc<Model>) -> (Scheduler, (Events, impl Sized)) {
        let mut s = scheduler(model, 2);
        let (a, a_events) = job(model, vec![1, 5, 6, 7], 200);
        let a_place = s.admission.submit(vec![vec![a]]).expect("submit a");
        while produced(&s, 0) < 3 {
            s.admit();
            assert!(s.step(), "a step");
        }
        s.pacer = ChunkPacer::new(512, 2.0);
        s.pacer.record(1, 0, 0, Duration::from_millis(10));
        s.pacer.record(0, 100, 100, Duration::from_millis(100));
        (s, (a_events, a_place))
    }

    #[test]
    fn a_long_prompt_goes_in_by_chunks_while_a_stream_decodes() {
        let model = model();
        let (mut s, _a) = streaming(&model);
        // The first chunk is 10 tokens; the chunks grow at most twofold per step from
        // there.
        // The long prompt.
        let prompt: Vec<u32> = (0..300).map(|i| (i * 7 % 299 + 1) as u32).collect();
        let (b, _b_events) = job(&model, prompt.clone(), 4);
        let _b_place = s.admission.submit(vec![vec![b]]).expect("submit b");
        let a_before = produced(&s, 0);
        let mut steps = 0;
        loop {
            s.admit();
            assert!(s.step(), "a step");
            steps += 1;
            if s.slots[1].active.is_some() {
                break;
            }
            assert!(steps < 100, "the prompt never went in");
        }
        // One decode row of the stream in every step of the prompt's prefill (10 + 20 +
        // 40 + 80 + 160 tokens at the most).
        assert!(steps >= 5, "{steps} steps");
        assert_eq!(produced(&s, 0) - a_before, steps);
        // The chunks change nothing: the first token is the whole prompt's greedy one.
        let mut alone = model.session().expect("session");
        let logits = alone.prefill(&prompt).expect("prefill");
        let values = logits_slice(&logits).expect("logits");
        let greedy = (0..values.len())
            .max_by(|&x, &y| values[x].total_cmp(&values[y]))
            .expect("a logit") as u32;
        assert_eq!(s.slots[1].session.tokens(), prompt.as_slice());
        let next = s.slots[1].active.as_ref().and_then(|a| a.next_token);
        assert_eq!(next, Some(greedy));
    }

    #[test]
    fn a_scored_prompt_goes_in_by_chunks_while_a_stream_decodes() {
        let model = model();
        let (mut s, _a) = streaming(&model);
        let prompt: Vec<u32> = (0..95).map(|i| (i * 7 % 299 + 1) as u32).collect();
        let (mut b, mut b_events) = job(&model, prompt.clone(), 2);
        b.prompt_logprobs = true;
        b.logprobs = Some(2);
        let _b_place = s.admission.submit(vec![vec![b]]).expect("submit b");
        let a_before = produced(&s, 0);
        let mut iterations = 0;
        while s.slots[1].active.is_none() {
            s.admit();
            assert!(s.step(), "a step");
            iterations += 1;
            assert!(iterations < 100, "the prompt never went in");
        }
        // 95 tokens in chunks of 10, 20, 40 at the most, a stream token in every step.
        assert!(iterations >= 4, "{iterations} iterations");
        assert_eq!(produced(&s, 0) - a_before, iterations);
        // The chunks change nothing: the log-probabilities of a whole scoring.
        let mut alone = model.session().expect("session");
        let logits = alone.logits_all(&prompt).expect("logits");
        let values = logits_slice(&logits).expect("values");
        let vocab = values.len() / prompt.len();
        let expected: Vec<_> = (1..prompt.len())
            .map(|p| {
                crate::engine::token_logprobs(&values[(p - 1) * vocab..p * vocab], prompt[p], 2)
            })
            .collect();
        let mut scored = None;
        while let Ok((_, event)) = b_events.try_recv() {
            if let JobEvent::PromptLogprobs(entries) = event {
                scored = Some(entries);
            }
        }
        assert_eq!(scored.as_deref(), Some(expected.as_slice()));
    }

    #[test]
    fn a_prompt_goes_in_while_more_streams_decode_than_a_step_holds() {
        let model = model();
        let mut s = scheduler(&model, 8);
        // Steps of 6 tokens, with 7 streams generating.
        s.max_tokens = 6;
        s.pacer = ChunkPacer::new(6, 2.0);
        let mut events = Vec::new();
        for k in 0..7 {
            let (j, rx) = job(&model, vec![1, 5 + k], 400);
            let place = s.admission.submit(vec![vec![j]]).expect("submit");
            events.push((rx, place));
        }
        while (0..7).any(|i| produced(&s, i) < 2) {
            s.admit();
            assert!(s.step(), "a step");
        }
        let prompt: Vec<u32> = (0..40).map(|i| (i * 7 % 299 + 1) as u32).collect();
        let (b, _b_events) = job(&model, prompt.clone(), 4);
        let _b_place = s.admission.submit(vec![vec![b]]).expect("submit b");
        let before: Vec<usize> = (0..7).map(|i| produced(&s, i)).collect();
        let mut steps = 0;
        while s.slots[7].active.is_none() {
            s.admit();
            assert!(s.step(), "a step");
            steps += 1;
            assert!(steps < 100, "the prompt never went in");
        }
        assert_eq!(s.slots[7].session.tokens(), prompt.as_slice());
        // Every stream still had its turns meanwhile (2 rows a step, 7 streams).
        for i in 0..7 {
            assert!(
                produced(&s, i) - before[i] >= steps * 2 / 7 - 1,
                "stream {i}: {} tokens in {steps} steps",
                produced(&s, i) - before[i]
            );
        }
    }
}
