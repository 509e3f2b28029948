//! The ways of reaching a prompt's positions that issue #28 holds bit-identical, shared by
//! the CPU test (`engine_row_invariance.rs`, every format at 1, 2 and 3 threads) and the
//! GPU one (`engine_gpu.rs`, the formats the shaders read, on lavapipe in CI):
//!
//! - **one-shot prefill**: `Session::logits_all` over the whole prompt, one forward
//!   step (the reference);
//! - **chunked prefill**: `logits_all` over chunks of 1 to 17 tokens;
//! - **decode**: `Session::step`, token by token;
//! - **batched decode**: `step_batch` beside three other sessions at other positions,
//!   the prompt's session in a different slot of the batch at each step;
//! - **cache reuse**: a run that shares only a prefix with the prompt, `Session::truncate`
//!   back to that prefix (its logits are those of that run), then the rest of the prompt;
//! - **mixed steps**: `step_spans` running the chunked prefill's chunks beside a decode
//!   row of each of three other sessions, the prompt's span in a different slot of the
//!   batch at each step (the server's chunked prefill). A mixed step gives the logits of
//!   each span's last token, so this way is compared at the chunk ends.

#![allow(dead_code, unreachable_pub)]

use std::fmt;
use std::sync::Arc;

use tempra_llm::engine::{Model, Session, logits_slice, step_batch, step_spans};

/// Sessions per batched decode step: the prompt's and three others. A model that runs
/// [`batched_decode`] is loaded with `batch_sessions` at least this.
pub const BATCH: usize = 4;
/// The longest chunk of the chunked prefill.
const MAX_CHUNK: usize = 17;

/// A 64-bit linear congruential generator (Knuth's MMIX constants): the prompts, chunk
/// sizes and prefixes, the same on every run.
pub struct Lcg(pub u64);

impl Lcg {
    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }

    /// A value in `range`.
    pub fn within(&mut self, range: std::ops::RangeInclusive<usize>) -> usize {
        range.start() + self.below(range.end() - range.start() + 1)
    }

    /// `len` random token ids.
    pub fn tokens(&mut self, len: usize, vocab: usize) -> Vec<u32> {
        (0..len).map(|_| self.below(vocab) as u32).collect()
    }
}

/// Where and by how much two `[positions, vocab]` logit tables differ.
pub struct Difference {
    /// The first position whose logits differ.
    pub position: usize,
    /// The first differing logit of that position.
    pub index: usize,
    pub want: f32,
    pub got: f32,
    /// The largest |got − want| over the table.
    pub max_diff: f32,
    /// How many positions differ.
    pub positions: usize,
    /// Positions compared.
    pub of: usize,
}

/// A way (of `case`) whose logits are not the reference's bits.
pub struct Mismatch {
    /// What was compared: format, backend or threads, and way.
    pub case: String,
    /// Where it differs.
    pub difference: Difference,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.difference;
        write!(
            f,
            "{}: position {} logit {}: {:e} ({:#010x}) where the reference has {:e} ({:#010x}); \
             {} of {} positions differ, max |Δ| {:e}",
            self.case,
            d.position,
            d.index,
            d.got,
            d.got.to_bits(),
            d.want,
            d.want.to_bits(),
            d.positions,
            d.of,
            d.max_diff
        )
    }
}

/// `None` when `got` holds `want`'s bits; else where they first differ.
pub fn difference(want: &[f32], got: &[f32], vocab: usize) -> Option<Difference> {
    assert_eq!(want.len(), got.len(), "logit tables of different sizes");
    let mut first = None;
    let mut positions = 0;
    let mut max_diff = 0f32;
    for (p, (w, g)) in want.chunks(vocab).zip(got.chunks(vocab)).enumerate() {
        let mut row_differs = false;
        for (i, (&w, &g)) in w.iter().zip(g).enumerate() {
            if w.to_bits() != g.to_bits() {
                row_differs = true;
                // A NaN on one side counts as an infinite difference.
                let d = (g - w).abs();
                max_diff = max_diff.max(if d.is_nan() { f32::INFINITY } else { d });
                first.get_or_insert((p, i, w, g));
            }
        }
        positions += usize::from(row_differs);
    }
    let of = want.len() / vocab;
    first.map(|(position, index, want, got)| Difference {
        position,
        index,
        want,
        got,
        max_diff,
        positions,
        of,
    })
}

/// Copies a logits tensor to a vector (so the step arena's slot is free again).
pub fn values(logits: &tempra_tensor::Tensor) -> Vec<f32> {
    logits_slice(logits).expect("contiguous logits").to_vec()
}

/// The prompt and the other sessions' inputs, the same at every thread count.
pub struct Inputs {
    /// The prompt, 40 to 70 tokens.
    pub prompt: Vec<u32>,
    /// Chunk lengths of the chunked prefill, summing to the prompt's length.
    pub chunks: Vec<usize>,
    /// The prompts of the batch's other sessions (of different lengths) and the tokens
    /// they decode, one per step.
    pub others: Vec<(Vec<u32>, Vec<u32>)>,
    /// The prompt prefix the cache-reuse run shares, and the tokens it runs after it.
    pub shared: usize,
    /// The tokens after the shared prefix.
    pub divergent: Vec<u32>,
}

impl Inputs {
    /// Random inputs for a model of `vocab` tokens.
    pub fn new(rng: &mut Lcg, vocab: usize) -> Inputs {
        let len = rng.within(40..=70);
        let prompt = rng.tokens(len, vocab);
        let mut chunks = Vec::new();
        let mut left = len;
        while left > 0 {
            let chunk = rng.within(1..=MAX_CHUNK).min(left);
            chunks.push(chunk);
            left -= chunk;
        }
        let others = [5, 23, 41]
            .into_iter()
            .map(|other_len| (rng.tokens(other_len, vocab), rng.tokens(len, vocab)))
            .collect();
        let shared = rng.within(1..=len - 1);
        let divergent_len = rng.within(1..=20);
        let mut divergent = rng.tokens(divergent_len, vocab);
        if divergent[0] == prompt[shared] {
            divergent[0] = (divergent[0] + 1) % vocab as u32;
        }
        Inputs {
            prompt,
            chunks,
            others,
            shared,
            divergent,
        }
    }
}

// The ways besides the reference: each returns the logits of every prompt position,
// `[len × vocab]`.

/// `logits_all` over the chunks of `inputs.chunks`.
pub fn chunked_prefill(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let mut session = model.session().expect("session");
    let mut logits = Vec::new();
    let mut start = 0;
    for &chunk in &inputs.chunks {
        let tokens = &inputs.prompt[start..start + chunk];
        logits.extend(values(&session.logits_all(tokens).expect("chunk")));
        start += chunk;
    }
    logits
}

/// `Session::step` per token.
pub fn decode(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let mut session = model.session().expect("session");
    let mut logits = Vec::new();
    for &token in &inputs.prompt {
        logits.extend(values(&session.step(token).expect("step")));
    }
    logits
}

/// The batch's other sessions, each holding its prompt.
fn other_sessions(model: &Arc<Model>, inputs: &Inputs) -> Vec<Session> {
    inputs
        .others
        .iter()
        .map(|(prompt, _)| {
            let mut s = model.session().expect("session");
            s.prefill(prompt).expect("prefill");
            s
        })
        .collect()
}

/// `step_batch` with the other sessions, the prompt's one slot further each step.
pub fn batched_decode(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let vocab = model.config().vocab_size;
    let mut session = model.session().expect("session");
    let mut others = other_sessions(model, inputs);
    let mut logits = Vec::new();
    for (step, &token) in inputs.prompt.iter().enumerate() {
        // The prompt's session goes to slot `step % BATCH`, the others around it.
        let slot = step % BATCH;
        let mut batch: Vec<&mut Session> = others.iter_mut().collect();
        batch.insert(slot, &mut session);
        let mut tokens: Vec<u32> = inputs.others.iter().map(|(_, t)| t[step]).collect();
        tokens.insert(slot, token);
        let rows = values(&step_batch(&mut batch, &tokens).expect("batched step"));
        logits.extend_from_slice(&rows[slot * vocab..][..vocab]);
    }
    logits
}

/// The shared prefix's logits from a run that then diverges; after truncating back to
/// the prefix, the rest of the prompt's.
pub fn cache_reuse(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let vocab = model.config().vocab_size;
    let (shared, rest) = inputs.prompt.split_at(inputs.shared);
    let mut session = model.session().expect("session");
    let first_run: Vec<u32> = shared.iter().chain(&inputs.divergent).copied().collect();
    let mut logits = values(&session.logits_all(&first_run).expect("first run"));
    logits.truncate(shared.len() * vocab);
    session.truncate(shared.len());
    logits.extend(values(&session.logits_all(rest).expect("the rest")));
    logits
}

/// The chunked prefill's chunks as spans of `step_spans` beside one decode row of each
/// other session, the prompt's span one slot further each step: the logits at each
/// chunk's end, in order.
pub fn mixed_steps(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let vocab = model.config().vocab_size;
    let mut session = model.session().expect("session");
    let mut others = other_sessions(model, inputs);
    let mut logits = Vec::new();
    let mut start = 0;
    for (step, &chunk) in inputs.chunks.iter().enumerate() {
        let slot = step % BATCH;
        let mut batch: Vec<&mut Session> = others.iter_mut().collect();
        batch.insert(slot, &mut session);
        let decoded: Vec<u32> = inputs.others.iter().map(|(_, t)| t[step]).collect();
        let mut spans: Vec<&[u32]> = decoded.chunks(1).collect();
        spans.insert(slot, &inputs.prompt[start..start + chunk]);
        let rows = values(&step_spans(&mut batch, &spans).expect("mixed step"));
        logits.extend_from_slice(&rows[slot * vocab..][..vocab]);
        start += chunk;
    }
    logits
}

/// The rows of `reference` (every position's logits) at the chunk ends of `inputs`.
fn chunk_ends(reference: &[f32], inputs: &Inputs, vocab: usize) -> Vec<f32> {
    let mut end = 0;
    let mut rows = Vec::with_capacity(inputs.chunks.len() * vocab);
    for &chunk in &inputs.chunks {
        end += chunk;
        rows.extend_from_slice(&reference[(end - 1) * vocab..][..vocab]);
    }
    rows
}

/// One way of reaching every position: the logits it gives, position after position.
pub type Way = fn(&Arc<Model>, &Inputs) -> Vec<f32>;

/// The ways compared with the one-shot prefill.
pub const WAYS: [(&str, Way); 4] = [
    ("chunked prefill", chunked_prefill),
    ("decode", decode),
    ("batched decode", batched_decode),
    ("cache reuse", cache_reuse),
];

/// The one-shot prefill of `inputs.prompt` on `model`: the reference of every way.
pub fn one_shot(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let mut session = model.session().expect("session");
    values(&session.logits_all(&inputs.prompt).expect("prefill"))
}

/// Runs every way of [`WAYS`] on `model` against `reference` (the one-shot prefill's
/// logits) and adds a [`Mismatch`] named `case, way` for each that is not bit-identical.
pub fn check_ways(
    model: &Arc<Model>,
    inputs: &Inputs,
    reference: &[f32],
    case: &str,
    mismatches: &mut Vec<Mismatch>,
) {
    let vocab = model.config().vocab_size;
    for (way, run) in WAYS {
        if let Some(difference) = difference(reference, &run(model, inputs), vocab) {
            mismatches.push(Mismatch {
                case: format!("{case}, {way}"),
                difference,
            });
        }
    }
    let ends = chunk_ends(reference, inputs, vocab);
    if let Some(difference) = difference(&ends, &mixed_steps(model, inputs), vocab) {
        mismatches.push(Mismatch {
            case: format!("{case}, mixed steps (positions are chunk ends)"),
            difference,
        });
    }
}

/// Panics with every mismatch, one per line, unless there are none.
pub fn assert_none(mismatches: &[Mismatch]) {
    assert!(
        mismatches.is_empty(),
        "{} cases differ from the one-shot prefill:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
