//! `tempra run`: generate text from a prompt, streaming it to stdout.

use std::io::Write;
use std::time::Instant;

use anyhow::bail;
use tempra_llm::engine::{Generation, Sampler, StopConditions};
use tempra_llm::tokenizer::TokenizeOptions;

use crate::cli::constraint_args::ConstraintArgs;
use crate::cli::engine_args::EngineArgs;
use crate::cli::model_arg::EMBEDDED_MODEL;
use crate::cli::sampling_args::SamplingArgs;

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
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    constraint: ConstraintArgs,
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
    let grammar = args.constraint.load(vocab)?;
    let seed = args.sampling.seed();
    let sampler = Sampler::new(args.sampling.config(seed));
    let stop = StopConditions {
        max_tokens: args.n,
        ..StopConditions::default()
    };
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", args.prompt)?;
    stdout.flush()?;
    let mut session = model.session()?;
    let start = Instant::now();
    let budget = args
        .n
        .unwrap_or(usize::MAX)
        .min(model.context_length() + 1 - prompt.len());
    let constraint = grammar.map(|g| g.constraint(budget)).transpose()?;
    let mut generation = Generation::new(&mut session, &prompt, sampler, stop)?;
    if let Some(c) = constraint {
        generation = generation.with_constraint(c);
    }
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
