//! `tempra detokenize -m MODEL --ids 1,2,3`: prints the text of token ids.

use std::io::Write;

use anyhow::Context;
use tempra_llm::tokenizer::{DetokenizeOptions, TokenId};

use super::model_arg::ModelArgs;
use super::vocab_source::load_vocabulary;

/// Arguments of `tempra detokenize`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "MODEL may also be a llama2.c tokenizer file (tok512.bin) on its own. \
The text is written as it is, without a trailing newline."
)]
pub(crate) struct DetokenizeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Token ids, separated by commas or spaces (`1,2,3`, `"1 2 3"`, `[1, 2, 3]`).
    #[arg(long, value_name = "IDS", allow_hyphen_values = true)]
    ids: String,
    /// Render control tokens (BOS, EOS, chat markers) as their text.
    #[arg(long)]
    render_special: bool,
}

/// Detokenizes and writes the text's bytes to stdout, as they are (no newline added).
pub(crate) fn run(args: DetokenizeArgs) -> anyhow::Result<()> {
    let ids = parse_ids(&args.ids)?;
    let vocab = load_vocabulary(&args.model)?;
    let options = DetokenizeOptions {
        render_special: args.render_special,
        strip_leading_space: true,
    };
    let bytes = vocab.detokenize_bytes(&ids, options)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&bytes)
        .and_then(|()| stdout.flush())
        .context("writing to stdout")?;
    Ok(())
}

/// Parses `1,2,3`, `1 2 3` or `[1, 2, 3]`.
fn parse_ids(s: &str) -> anyhow::Result<Vec<TokenId>> {
    let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
    inner
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<TokenId>()
                .map_err(|_| anyhow::anyhow!("--ids: `{t}` is not a token id"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_ids;

    #[test]
    fn id_lists() {
        assert_eq!(parse_ids("1,2,3").unwrap(), [1, 2, 3]);
        assert_eq!(parse_ids(" [1, 2 ,3] ").unwrap(), [1, 2, 3]);
        assert_eq!(parse_ids("4 5").unwrap(), [4, 5]);
        assert!(parse_ids("").unwrap().is_empty());
        assert!(parse_ids("1,x").is_err());
        assert!(parse_ids("-1").is_err());
    }
}
