//! `tempra tokenize -m MODEL (-p TEXT | -f FILE) [--no-special] [--parse-special]
//! [--json] [--show-pieces]`: prints the token ids of a text.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use tempra_llm::LlmError;
use tempra_llm::tokenizer::{TokenId, TokenizeOptions, Vocabulary};

use super::model_arg::ModelArgs;
use super::vocab_source::load_vocabulary;

/// Arguments of `tempra tokenize`.
#[derive(Debug, clap::Args)]
#[command(
    group = clap::ArgGroup::new("input").required(true).args(["prompt", "file"]),
    after_help = "MODEL may also be a llama2.c tokenizer file (tok512.bin) on its own."
)]
pub(crate) struct TokenizeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The text to tokenize.
    #[arg(short = 'p', long = "prompt", value_name = "TEXT")]
    prompt: Option<String>,
    /// Tokenize this file's bytes, verbatim (no trimming); it must be UTF-8.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Add no BOS/EOS.
    #[arg(long)]
    no_special: bool,
    /// Read special-token text in the input (`<s>`, `<|im_end|>`) as those tokens.
    #[arg(long)]
    parse_special: bool,
    /// Print a JSON array of ids.
    #[arg(long)]
    json: bool,
    /// Print a JSON array of `{"id", "piece"}` objects.
    #[arg(long)]
    show_pieces: bool,
}

/// Tokenizes and prints.
pub(crate) fn run(args: TokenizeArgs) -> anyhow::Result<()> {
    let text = match (&args.prompt, &args.file) {
        (Some(p), _) => p.clone(),
        (None, Some(path)) => read_utf8(path)?,
        (None, None) => anyhow::bail!("give the text with -p TEXT or -f FILE"),
    };
    let vocab = load_vocabulary(&args.model)?;
    let options = TokenizeOptions {
        add_special: !args.no_special,
        parse_special: args.parse_special,
    };
    let ids = vocab.tokenize(&text, options);
    let out = if args.show_pieces {
        pieces_json(&vocab, &ids)?
    } else if args.json {
        serde_json::to_string(&ids)?
    } else {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}").context("writing to stdout")?;
    Ok(())
}

/// A file's bytes as UTF-8; invalid UTF-8 is an error naming the byte offset.
fn read_utf8(path: &std::path::Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    String::from_utf8(bytes).map_err(|e| {
        LlmError::InvalidUtf8 {
            path: path.display().to_string(),
            offset: e.utf8_error().valid_up_to(),
        }
        .into()
    })
}

/// `[{"id": 1, "piece": "<s>"}, ...]`: each token's text, control tokens included. A
/// piece that is not UTF-8 on its own (a byte of a split character) is shown lossily
/// with its `bytes`.
fn pieces_json(vocab: &Vocabulary, ids: &[TokenId]) -> anyhow::Result<String> {
    let items = ids
        .iter()
        .map(|&id| {
            let bytes = vocab.token_piece(id, true)?;
            Ok(match std::str::from_utf8(&bytes) {
                Ok(piece) => serde_json::json!({ "id": id, "piece": piece }),
                Err(_) => serde_json::json!({ "id": id, "piece": String::from_utf8_lossy(&bytes), "bytes": bytes }),
            })
        })
        .collect::<Result<Vec<_>, LlmError>>()?;
    Ok(serde_json::to_string(&items)?)
}
