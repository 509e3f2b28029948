//! `tempra run`: generate text from a prompt, streaming it to stdout.

use std::io::Write;
use std::time::Instant;

use anyhow::bail;
use tempra_llm::engine::{Generation, Sampler, SamplerConfig, StopConditions};
use tempra_llm::tokenizer::TokenizeOptions;

use crate::cli::engine_args::EngineArgs;
use crate::cli::model_arg::EMBEDDED_MODEL;

/// Arguments of `tempra run`.
// Without `-m`, `run` uses the demo model built into tempra.
#[derive(Debug, clap::Args)]
#[command(mut_arg("model", |a| a
    .required(false)
    .default_value(EMBEDDED_MODEL)
    .help("Model file: GGUF, or a llama2.c checkpoint together with --tokenizer; @demo is the small story model built into tempra")))]
pub(crate) struct RunArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// The prompt (echoed before the generated text).
    #[arg(short = 'p', long, default_value = "")]
    prompt: String,
    /// Tokens to generate (default: until an end token or a full context).
    #[arg(short = 'n', long = "n-predict", value_name = "N")]
    n: Option<usize>,
    /// Temperature (0: greedy).
    #[arg(long = "temp", default_value_t = 0.8)]
    temperature: f32,
    /// Keep the K most likely tokens (0: all).
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Nucleus sampling threshold (1: off).
    #[arg(long = "top-p", default_value_t = 0.95)]
    top_p: f32,
    /// Drop tokens below this fraction of the best one's probability (0: off).
    #[arg(long = "min-p", default_value_t = 0.05)]
    min_p: f32,
    /// Repetition penalty (1: off).
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Random seed (default: a random one).
    #[arg(long)]
    seed: Option<u64>,
}

/// Runs `tempra run`.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    let model = args.engine.load()?;
    let vocab = model.vocab();
    let prompt = vocab.tokenize(&args.prompt, TokenizeOptions::default());
    if prompt.is_empty() {
        bail!("the prompt tokenized to nothing and the model adds no BOS: give a prompt with -p");
    }
    if prompt.len() >= model.context_length() {
        bail!(
            "the prompt is {} tokens, the context holds {} (raise --ctx)",
            prompt.len(),
            model.context_length()
        );
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let sampler = Sampler::new(SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repetition_penalty: args.repeat_penalty,
        seed,
        ..SamplerConfig::default()
    });
    let stop = StopConditions {
        max_tokens: args.n,
        ..StopConditions::default()
    };
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", args.prompt)?;
    stdout.flush()?;
    let mut session = model.session()?;
    let start = Instant::now();
    let mut generation = Generation::new(&mut session, &prompt, sampler, stop)?;
    let prefill_secs = start.elapsed().as_secs_f64();
    let gen_start = Instant::now();
    for piece in generation.by_ref() {
        write!(stdout, "{}", piece?.text)?;
        stdout.flush()?;
    }
    let rest = generation.take_remaining_text();
    writeln!(stdout, "{rest}")?;
    let produced = generation.produced();
    let gen_secs = gen_start.elapsed().as_secs_f64();
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s | generation: {} tokens, {:.1} tok/s | stop: {:?}",
        prompt.len(),
        prompt.len() as f64 / prefill_secs.max(1e-9),
        produced,
        produced as f64 / gen_secs.max(1e-9),
        generation.finish_reason()
    );
    Ok(())
}
