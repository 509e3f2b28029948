//! Issue #28, "same request, same tokens": the logits of a token at a position are
//! bit-identical however the engine got there.
//!
//! For every file type the random model builder writes (F32, F16, BF16, Q8_0, Q4_0,
//! Q4_1, Q5_0, Q5_1 and the Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K mixes) and 1, 2 and 3
//! worker threads, the logits of every position of a random prompt are
//! computed five ways:
//!
//! - **one-shot prefill**: `Session::logits_all` over the whole prompt, one forward
//!   step (the reference);
//! - **chunked prefill**: `logits_all` over chunks of 1 to 17 tokens;
//! - **decode**: `Session::step`, token by token;
//! - **batched decode**: `step_batch` beside three other sessions at other positions,
//!   the prompt's session in a different slot of the batch at each step;
//! - **cache reuse**: a run that shares only a prefix with the prompt, `Session::truncate`
//!   back to that prefix (its logits are those of that run), then the rest of the prompt.
//!
//! Each way must give the reference's f32 values bit for bit (`to_bits`), and the
//! reference at 2 and 3 threads must be the reference at 1 thread. Every mismatch, per
//! (format, threads, way), is collected and reported together at the end.
//!
//! The model is sized so that the CPU worker pool really splits the work: the float dot
//! products and quantized products split a matrix only when it holds at least two tasks
//! of 64 KiB of weight bytes. With dim 512 and ffn 1536 every feed-forward matrix does in
//! every format, as do the attention matrices in all but the smallest formats and the
//! 2048-row output head in all of them; GQA (8 query heads over 2 KV heads) runs the
//! grouped attention.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use tempra_llm::ModelFile;
use tempra_llm::engine::{LoadOptions, Model, Session, logits_slice, step_batch};
use tempra_llm::gguf::Limits;
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

/// The model: see the module docs for why this size.
const SHAPE: &str = "dim=512,layers=2,heads=8,kv_heads=2,ffn=1536,vocab=2048,context=160";
/// Worker threads of each load of the model.
const THREADS: [usize; 3] = [1, 2, 3];
/// Sessions per batched decode step: the prompt's and three others.
const BATCH: usize = 4;
/// The longest chunk of the chunked prefill.
const MAX_CHUNK: usize = 17;

/// A 64-bit linear congruential generator (Knuth's MMIX constants): the prompts, chunk
/// sizes and prefixes, the same on every run.
struct Lcg(u64);

impl Lcg {
    /// A value in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }

    /// A value in `range`.
    fn within(&mut self, range: std::ops::RangeInclusive<usize>) -> usize {
        range.start() + self.below(range.end() - range.start() + 1)
    }

    /// `len` random token ids.
    fn tokens(&mut self, len: usize, vocab: usize) -> Vec<u32> {
        (0..len).map(|_| self.below(vocab) as u32).collect()
    }
}

/// Where and by how much two `[positions, vocab]` logit tables differ.
struct Difference {
    /// The first position whose logits differ.
    position: usize,
    /// The first differing logit of that position.
    index: usize,
    want: f32,
    got: f32,
    /// The largest |got − want| over the table.
    max_diff: f32,
    /// How many positions differ.
    positions: usize,
    /// Positions compared.
    of: usize,
}

/// A way (of `case`) whose logits are not the reference's bits.
struct Mismatch {
    case: String,
    difference: Difference,
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
fn difference(want: &[f32], got: &[f32], vocab: usize) -> Option<Difference> {
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
fn values(logits: &tempra_tensor::Tensor) -> Vec<f32> {
    logits_slice(logits).expect("contiguous logits").to_vec()
}

/// The prompt and the other sessions' inputs, the same at every thread count.
struct Inputs {
    prompt: Vec<u32>,
    /// Chunk lengths of the chunked prefill, summing to the prompt's length.
    chunks: Vec<usize>,
    /// The prompts of the batch's other sessions (of different lengths) and the tokens
    /// they decode, one per step.
    others: Vec<(Vec<u32>, Vec<u32>)>,
    /// The prompt prefix the cache-reuse run shares, and the tokens it runs after it.
    shared: usize,
    divergent: Vec<u32>,
}

impl Inputs {
    fn new(rng: &mut Lcg, vocab: usize) -> Inputs {
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
fn chunked_prefill(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
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
fn decode(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let mut session = model.session().expect("session");
    let mut logits = Vec::new();
    for &token in &inputs.prompt {
        logits.extend(values(&session.step(token).expect("step")));
    }
    logits
}

/// `step_batch` with the other sessions, the prompt's one slot further each step.
fn batched_decode(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
    let vocab = model.config().vocab_size;
    let mut session = model.session().expect("session");
    let mut others: Vec<Session> = inputs
        .others
        .iter()
        .map(|(prompt, _)| {
            let mut s = model.session().expect("session");
            s.prefill(prompt).expect("prefill");
            s
        })
        .collect();
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
fn cache_reuse(model: &Arc<Model>, inputs: &Inputs) -> Vec<f32> {
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

/// One way of reaching every position: the logits it gives, position after position.
type Way = fn(&Arc<Model>, &Inputs) -> Vec<f32>;

/// The ways compared with the one-shot prefill.
const WAYS: [(&str, Way); 4] = [
    ("chunked prefill", chunked_prefill),
    ("decode", decode),
    ("batched decode", batched_decode),
    ("cache reuse", cache_reuse),
];

/// Every way at every thread count against the one-shot prefill of its thread count and
/// that against the one-shot prefill at one thread; returns the mismatches.
fn check_format(qtype: QuantType, seed: u64) -> Vec<Mismatch> {
    let shape = ModelShape::parse(SHAPE).expect("shape");
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(qtype)
        .with_seed(seed);
    let bytes = Arc::new(write_random_model(&spec, Vec::new()).expect("random model"));
    let inputs = Inputs::new(&mut Lcg(seed), shape.vocab);
    let mut mismatches = Vec::new();
    let mut one_thread: Option<Vec<f32>> = None;
    for threads in THREADS {
        let began = Instant::now();
        let file = ModelFile::from_gguf_bytes(bytes.clone(), &Limits::default()).expect("file");
        let options = LoadOptions {
            threads: Some(threads),
            batch_sessions: BATCH,
            ..LoadOptions::default()
        };
        let model = Model::from_file(file, &options).expect("load");
        assert_eq!(model.executor().threads(), threads, "{qtype}");
        let vocab = model.config().vocab_size;
        let reference = values(
            &model
                .session()
                .expect("session")
                .logits_all(&inputs.prompt)
                .expect("prefill"),
        );
        let mut report = |way: &str, want: &[f32], got: &[f32]| {
            if let Some(difference) = difference(want, got, vocab) {
                mismatches.push(Mismatch {
                    case: format!("{qtype}, {threads} threads, {way}"),
                    difference,
                });
            }
        };
        match &one_thread {
            None => one_thread = Some(reference.clone()),
            Some(want) => report("one-shot prefill against 1 thread", want, &reference),
        }
        for (way, run) in WAYS {
            report(way, &reference, &run(&model, &inputs));
        }
        eprintln!(
            "{qtype}, {threads} threads: {} tokens in {:.1?}",
            inputs.prompt.len(),
            began.elapsed()
        );
    }
    mismatches
}

#[test]
fn logits_are_bit_identical_however_a_position_is_reached() {
    let mut mismatches = Vec::new();
    for (i, qtype) in QuantType::ALL.into_iter().enumerate() {
        mismatches.extend(check_format(qtype, 28 + i as u64));
    }
    assert!(
        mismatches.is_empty(),
        "{} (format, threads, way) cases differ from the one-shot prefill:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `LoadOptions::fast_prefill` reaches the backend: with it, an F16 model's one-shot
/// prefill runs the blocked GEMM and its logits differ from decoding the same tokens one
/// at a time (the identity the default keeps).
#[test]
fn the_fast_prefill_option_gives_up_the_identity() {
    let shape = ModelShape::parse(SHAPE).expect("shape");
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(QuantType::F16)
        .with_seed(7);
    let bytes = Arc::new(write_random_model(&spec, Vec::new()).expect("random model"));
    let inputs = Inputs::new(&mut Lcg(7), shape.vocab);
    let load = |fast_prefill: bool| {
        let file = ModelFile::from_gguf_bytes(bytes.clone(), &Limits::default()).expect("file");
        let options = LoadOptions {
            threads: Some(2),
            fast_prefill,
            ..LoadOptions::default()
        };
        Model::from_file(file, &options).expect("load")
    };
    let one_shot = |model: &Arc<Model>| {
        values(
            &model
                .session()
                .expect("session")
                .logits_all(&inputs.prompt)
                .expect("prefill"),
        )
    };
    let vocab = shape.vocab;
    let fast = load(true);
    assert!(
        difference(&one_shot(&fast), &decode(&fast, &inputs), vocab).is_some(),
        "with fast_prefill the one-shot prefill matched decode bit for bit"
    );
    let default = load(false);
    if let Some(difference) = difference(&one_shot(&default), &decode(&default, &inputs), vocab) {
        let case = "F16 by default, decode against one-shot prefill".to_string();
        panic!("{}", Mismatch { case, difference });
    }
}
