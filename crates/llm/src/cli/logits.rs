//! `tempra logits`: the logits of every position of a token sequence, as one JSON object
//! on stdout (`{"tokens": [...], "logits": [[...], ...]}`).

use std::io::{BufWriter, Write};

use anyhow::bail;
use tempra_llm::engine::logits_slice;
use tempra_llm::tokenizer::TokenizeOptions;

use crate::cli::engine_args::EngineArgs;

/// Arguments of `tempra logits`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["tokens", "prompt"])))]
pub(crate) struct LogitsArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Token ids, comma-separated, used verbatim (no BOS is added).
    #[arg(long, value_name = "ID,ID,...", value_delimiter = ',', num_args = 1..)]
    tokens: Option<Vec<u32>>,
    /// A text, tokenized with the model's BOS setting.
    #[arg(short = 'p', long, value_name = "TEXT")]
    prompt: Option<String>,
}

/// Runs `tempra logits`.
pub(crate) fn run(args: LogitsArgs) -> anyhow::Result<()> {
    let model = args.engine.load()?;
    let tokens = match (&args.tokens, &args.prompt) {
        (Some(ids), _) => ids.clone(),
        (None, Some(text)) => model.vocab().tokenize(text, TokenizeOptions::default()),
        (None, None) => bail!("give --tokens or --prompt"),
    };
    if tokens.is_empty() {
        bail!("no tokens to evaluate (the prompt tokenized to nothing)");
    }
    let vocab = model.config().vocab_size;
    if let Some((i, &id)) = tokens
        .iter()
        .enumerate()
        .find(|&(_, &id)| id as usize >= vocab)
    {
        bail!("token {id} (at index {i}) is outside the vocabulary of {vocab} tokens");
    }
    if tokens.len() > model.context_length() {
        bail!(
            "{} tokens do not fit the context of {} (raise --ctx)",
            tokens.len(),
            model.context_length()
        );
    }
    let mut session = model.session()?;
    let logits = session.logits_all(&tokens)?;
    let values = logits_slice(&logits)?;

    let mut out = BufWriter::new(std::io::stdout().lock());
    write!(out, "{{\"tokens\": ")?;
    serde_json::to_writer(&mut out, &tokens)?;
    write!(out, ", \"logits\": [")?;
    for (i, row) in values.chunks_exact(vocab).enumerate() {
        if i > 0 {
            write!(out, ", ")?;
        }
        serde_json::to_writer(&mut out, row)?;
    }
    writeln!(out, "]}}")?;
    out.flush()?;
    Ok(())
}
