//! Training the demo model: corpus, tokenizer, AdamW with a warmup + cosine schedule
//! over the engine's own forward (written over autograd `Var`s), held-out evaluation and
//! the GGUF.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tempra_autograd::optim::{AdamW, AdamWConfig, Optimizer, WarmupCosine, clip_grad_norm};
use tempra_autograd::{Autograd, GradStore, ParamStore, no_grad};
use tempra_backend_cpu::CpuBackend;
use tempra_pool::HostPool;
use tempra_tensor::random::SplitMix64;
use tempra_tensor::{BinaryOp, ExecContext};

use crate::engine::{LogitRows, ModelWeights, forward};
use crate::error::{LlmError, Result};
use crate::model_config::ModelConfig;
use crate::tokenizer::{BpeTrainerConfig, Vocabulary, train_byte_level_bpe};

use super::corpus::StoryGenerator;
use super::dataset::TokenStream;
use super::demo_model::{
    DemoShape, demo_metadata, init_params, weights_from_params, write_demo_gguf,
};

/// The seed the held-out stories are generated from is the training seed xor this.
pub const HELD_OUT_SEED_XOR: u64 = 0x05EE_D0F4_E1D0;

/// How to train the demo model.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    /// The model sizes.
    pub shape: DemoShape,
    /// Tokenizer vocabulary size.
    pub vocab_size: usize,
    /// Bytes of generated stories the tokenizer is trained on.
    pub tokenizer_corpus_bytes: usize,
    /// Optimizer steps.
    pub steps: usize,
    /// Sequences per step (their gradients are averaged).
    pub batch: usize,
    /// Tokens per training sequence (at most `shape.context`).
    pub seq_len: usize,
    /// Training tokens generated (windows are drawn from them at random).
    pub train_tokens: usize,
    /// Held-out tokens evaluated at the end (from stories of another seed).
    pub held_out_tokens: usize,
    /// Peak learning rate.
    pub peak_lr: f64,
    /// Final learning rate.
    pub min_lr: f64,
    /// Warmup steps.
    pub warmup_steps: usize,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Gradient clipping by global norm.
    pub max_grad_norm: f64,
    /// The seed of the corpus, the initialisation and the window sampling.
    pub seed: u64,
    /// CPU worker threads.
    pub threads: usize,
}

impl Default for TrainConfig {
    /// The settings the embedded demo model was trained with.
    fn default() -> Self {
        Self {
            shape: DemoShape::DEFAULT,
            vocab_size: 1024,
            tokenizer_corpus_bytes: 2 << 20,
            steps: 700,
            batch: 8,
            seq_len: 128,
            train_tokens: 4_000_000,
            held_out_tokens: 20_000,
            peak_lr: 3e-3,
            min_lr: 3e-4,
            warmup_steps: 100,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            seed: 2024,
            threads: 2,
        }
    }
}

impl TrainConfig {
    /// Checks the settings are consistent.
    pub fn validate(&self) -> Result<()> {
        self.shape.validate()?;
        let bad = |what: String| Err(LlmError::Argument { what });
        if self.steps == 0 || self.batch == 0 || self.threads == 0 {
            return bad("steps, batch and threads must be at least 1".into());
        }
        if self.seq_len == 0 || self.seq_len > self.shape.context {
            return bad(format!(
                "the sequence length {} must be in 1..={} (the context)",
                self.seq_len, self.shape.context
            ));
        }
        if self.train_tokens <= self.seq_len {
            return bad(format!(
                "{} training tokens cannot fill a window of {}",
                self.train_tokens, self.seq_len
            ));
        }
        Ok(())
    }
}

/// One optimizer step's figures, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// The step just done (1-based).
    pub step: usize,
    /// Of how many.
    pub steps: usize,
    /// The step's mean training loss (nats per token).
    pub loss: f64,
    /// The learning rate used.
    pub lr: f64,
    /// Training tokens per second so far.
    pub tokens_per_second: f64,
}

/// What a training run made and measured.
#[derive(Debug)]
pub struct TrainReport {
    /// The GGUF file's bytes.
    pub gguf: Vec<u8>,
    /// Trainable parameters.
    pub parameters: usize,
    /// Training tokens the model saw (steps × batch × sequence length).
    pub tokens_seen: usize,
    /// Mean training loss over the last tenth of the steps.
    pub final_train_loss: f64,
    /// The training loss of the first step.
    pub first_train_loss: f64,
    /// Mean loss per token of the written (F16) model on held-out stories.
    pub held_out_loss: f64,
    /// Training time (excluding corpus and tokenizer preparation).
    pub train_time: Duration,
    /// Total time.
    pub total_time: Duration,
    /// Stories in the training stream.
    pub train_stories: usize,
}

/// What the training loop reports on as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A preparation stage started (corpus, tokenizer, tokenization).
    Stage(&'a str),
    /// A step finished.
    Step(StepStats),
}

/// The exec context training runs on: the CPU backend with `threads` threads.
fn cpu_context(threads: usize) -> ExecContext {
    ExecContext::new(Arc::new(CpuBackend::with_threads(
        HostPool::host(),
        threads,
    )))
}

/// Trains the tokenizer on the first `bytes` of stories from `seed`.
pub fn train_demo_tokenizer(seed: u64, bytes: usize, vocab_size: usize) -> Result<Vocabulary> {
    let corpus = StoryGenerator::new(seed).corpus(bytes);
    let config = BpeTrainerConfig {
        vocab_size,
        ..BpeTrainerConfig::default()
    };
    train_byte_level_bpe(corpus.split(super::corpus::STORY_SEPARATOR), &config)
}

/// The mean loss per predicted token of `weights` over `stream` in windows of `len`
/// tokens (no gradients recorded).
pub fn mean_loss(
    ag: &Autograd,
    config: &ModelConfig,
    weights: &ModelWeights,
    stream: &TokenStream,
    len: usize,
) -> Result<f64> {
    let _guard = no_grad();
    let (mut total, mut count) = (0.0, 0usize);
    for window in stream.windows(len) {
        let n = window.len() - 1;
        let logits = forward(ag, config, weights, &window[..n], None, LogitRows::All)?;
        let targets = ag.ctx().from_slice(&window[1..], &[n])?;
        let loss = ag.cross_entropy(&logits, &targets, None)?;
        total += loss.tensor().to_vec_f64()?[0] * n as f64;
        count += n;
    }
    Ok(total / count.max(1) as f64)
}

/// Trains a demo model as `config` says, calling `progress` at each stage and step, and
/// returns the GGUF bytes with the figures.
pub fn train_demo(
    config: &TrainConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<TrainReport> {
    config.validate()?;
    let start = Instant::now();
    progress(Progress::Stage("training the tokenizer"));
    let vocab = train_demo_tokenizer(
        config.seed,
        config.tokenizer_corpus_bytes,
        config.vocab_size,
    )?;
    progress(Progress::Stage("generating and tokenizing stories"));
    let train = TokenStream::generate(
        &mut StoryGenerator::new(config.seed),
        &vocab,
        config.train_tokens,
    )?;
    let held_out = TokenStream::generate(
        &mut StoryGenerator::new(config.seed ^ HELD_OUT_SEED_XOR),
        &vocab,
        config.held_out_tokens,
    )?;

    let shape = config.shape;
    let md = demo_metadata(&shape, &vocab, &[]);
    let model_config = ModelConfig::from_metadata(&md)?;
    let ctx = cpu_context(config.threads);
    let ag = Autograd::new(ctx.clone());
    let mut params = init_params(&ctx, &shape, vocab.len(), config.seed)?;
    let parameters = params.trainable_elements();
    let mut optimizer = AdamW::new(AdamWConfig {
        lr: config.peak_lr,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: config.weight_decay,
    })?;
    let schedule = WarmupCosine {
        peak_lr: config.peak_lr,
        min_lr: config.min_lr,
        warmup_steps: config.warmup_steps,
        total_steps: config.steps,
    };
    let mut rng = SplitMix64::new(config.seed ^ 0xA5A5_A5A5);
    let mut losses = Vec::with_capacity(config.steps);
    progress(Progress::Stage("training"));
    let train_start = Instant::now();
    for step in 0..config.steps {
        let lr = schedule.lr(step);
        optimizer.set_learning_rate(lr);
        let (mut grads, loss) = accumulate_step(
            &ag,
            &model_config,
            &params,
            &shape,
            &train,
            &mut rng,
            config,
        )?;
        clip_grad_norm(&ctx, &mut grads, config.max_grad_norm)?;
        optimizer.step(&ctx, &mut params, &grads)?;
        losses.push(loss);
        let seen = (step + 1) * config.batch * config.seq_len;
        progress(Progress::Step(StepStats {
            step: step + 1,
            steps: config.steps,
            loss,
            lr,
            tokens_per_second: seen as f64 / train_start.elapsed().as_secs_f64().max(1e-9),
        }));
    }
    let train_time = train_start.elapsed();

    progress(Progress::Stage(
        "writing the model and evaluating held-out loss",
    ));
    let tail = (config.steps / 10).max(1);
    let final_train_loss = losses[losses.len() - tail..].iter().sum::<f64>() / tail as f64;
    let notes = [
        ("seed", config.seed.to_string()),
        ("steps", config.steps.to_string()),
        (
            "tokens_seen",
            (config.steps * config.batch * config.seq_len).to_string(),
        ),
    ];
    let md = demo_metadata(&shape, &vocab, &notes);
    let gguf = write_demo_gguf(&params, &shape, &md, Vec::new())?;
    drop(params);
    let held_out_loss = held_out_loss_of_gguf(&gguf, &held_out, config.seq_len, config.threads)?;
    Ok(TrainReport {
        gguf,
        parameters,
        tokens_seen: config.steps * config.batch * config.seq_len,
        final_train_loss,
        first_train_loss: losses[0],
        held_out_loss,
        train_time,
        total_time: start.elapsed(),
        train_stories: train.stories(),
    })
}

/// Forward and backward over `config.batch` random windows; returns the gradients of
/// the mean loss and that loss.
fn accumulate_step(
    ag: &Autograd,
    model_config: &ModelConfig,
    params: &ParamStore,
    shape: &DemoShape,
    train: &TokenStream,
    rng: &mut SplitMix64,
    config: &TrainConfig,
) -> Result<(GradStore, f64)> {
    let ctx = ag.ctx();
    let weights = weights_from_params(params, shape)?;
    let n = config.seq_len;
    let mut acc: Option<GradStore> = None;
    let mut loss_sum = 0.0;
    for _ in 0..config.batch {
        let window = train.sample(rng, n).ok_or_else(|| LlmError::Argument {
            what: "the training stream is shorter than one window".into(),
        })?;
        let logits = forward(
            ag,
            model_config,
            &weights,
            &window[..n],
            None,
            LogitRows::All,
        )?;
        let targets = ctx.from_slice(&window[1..], &[n])?;
        let loss = ag.cross_entropy(&logits, &targets, None)?;
        drop(logits);
        loss_sum += loss.tensor().to_vec_f64()?[0];
        let scaled = ag.mul_scalar(&loss, 1.0 / config.batch as f64)?;
        let grads = ag.backward(&scaled)?;
        acc = Some(match acc {
            None => grads,
            Some(mut acc) => {
                for (_, _, var) in params.iter() {
                    let (Some(id), Some(g)) = (var.id(), grads.get(var)) else {
                        continue;
                    };
                    let sum = match acc.remove(var) {
                        Some(old) => ctx.binary_inplace(BinaryOp::Add, old, g)?,
                        None => g.clone(),
                    };
                    acc.insert(id, sum);
                }
                acc
            }
        });
    }
    let grads = acc.unwrap_or_default();
    Ok((grads, loss_sum / config.batch as f64))
}

/// The held-out loss of a demo GGUF (as written, F16 weights) over `stream`.
pub fn held_out_loss_of_gguf(
    gguf: &[u8],
    stream: &TokenStream,
    seq_len: usize,
    threads: usize,
) -> Result<f64> {
    let file = crate::ModelFile::from_gguf_bytes(
        Arc::new(gguf.to_vec()),
        &crate::gguf::Limits::default(),
    )?;
    let config = ModelConfig::from_metadata(file.metadata())?;
    let weights = ModelWeights::from_file(&file, &config)?;
    let ag = Autograd::new(cpu_context(threads));
    mean_loss(&ag, &config, &weights, stream, seq_len)
}
