//! `tempra perplexity`: perplexity of a text file, computed as llama.cpp's
//! `llama-perplexity` computes it.
//!
//! The text is tokenized once (with the model's BOS setting) and cut into non-overlapping
//! windows of `--ctx` tokens (a tail shorter than a window is dropped). Each window is
//! evaluated from an empty cache with its first token replaced by BOS where the model adds
//! one; only the second half of each window is scored (its first half gives every scored
//! token at least `ctx/2` tokens of context): the positions `ctx/2 .. ctx-1` predict the
//! tokens after them. The running perplexity is printed after each window, then the final
//! estimate with llama.cpp's standard error.

use std::io::Write;

use anyhow::{Context, bail};
use tempra_llm::engine::logits_slice;
use tempra_llm::tokenizer::TokenizeOptions;

use crate::cli::engine_args::EngineArgs;

/// The window length when `--ctx` is not given (llama-perplexity's customary 512).
const DEFAULT_WINDOW: usize = 512;

/// Arguments of `tempra perplexity`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("ctx", |a| a.help("Window length in tokens (default: 512, or the model's context if shorter)")))]
pub(crate) struct PerplexityArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// The text file to score.
    #[arg(short = 'f', long = "file", value_name = "TEXT")]
    file: std::path::PathBuf,
    /// Score at most this many windows (default: all).
    #[arg(long = "chunks", value_name = "N")]
    chunks: Option<usize>,
}

/// Negative log-likelihood sums over the scored tokens.
#[derive(Debug, Default, Clone, Copy)]
struct Nll {
    sum: f64,
    sum_sq: f64,
    count: usize,
}

impl Nll {
    fn add(&mut self, nll: f64) {
        self.sum += nll;
        self.sum_sq += nll * nll;
        self.count += 1;
    }

    fn perplexity(&self) -> f64 {
        (self.sum / self.count as f64).exp()
    }

    /// llama.cpp's uncertainty: the standard error of the mean NLL, times the perplexity.
    fn uncertainty(&self) -> f64 {
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        if self.count > 1 {
            self.perplexity() * (var / (n - 1.0)).sqrt()
        } else {
            f64::NAN
        }
    }
}

/// `-log softmax(logits)[target]`, in f64.
fn token_nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    let log_z = max + sum.ln();
    log_z - logits[target as usize] as f64
}

/// Runs `tempra perplexity`.
pub(crate) fn run(args: PerplexityArgs) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(&args.file).with_context(|| args.file.display().to_string())?;
    let mut engine = args.engine.clone();
    let probe = engine.model.open()?;
    let model_context = tempra_llm::model_config::ModelConfig::from_metadata(probe.metadata())
        .map(|c| c.context_length)
        .unwrap_or(usize::MAX);
    drop(probe);
    let window = *engine.ctx.get_or_insert(DEFAULT_WINDOW.min(model_context));
    if window < 4 {
        bail!("--ctx {window} is too short to score anything (use at least 4)");
    }
    let model = engine.load()?;
    let vocab = model.vocab();
    let tokens = vocab.tokenize(&text, TokenizeOptions::default());
    if tokens.len() < 2 * window {
        bail!(
            "{} has {} tokens; perplexity with --ctx {window} needs at least {} (2 windows' worth, as llama-perplexity)",
            args.file.display(),
            tokens.len(),
            2 * window
        );
    }
    let bos = vocab.bos().filter(|_| vocab.add_bos());
    let n_vocab = model.config().vocab_size;
    let mut windows = tokens.len() / window;
    if let Some(limit) = args.chunks {
        windows = windows.min(limit.max(1));
    }
    let first = window / 2;
    eprintln!(
        "perplexity: {} tokens, {windows} windows of {window}, scoring positions {first}..{} of each",
        tokens.len(),
        window - 1
    );

    let mut session = model.session()?;
    let mut nll = Nll::default();
    let mut out = std::io::stdout().lock();
    for w in 0..windows {
        let start = w * window;
        let mut input = tokens[start..start + window].to_vec();
        if let Some(bos) = bos {
            input[0] = bos;
        }
        session.reset();
        let logits = session.logits_all(&input)?;
        let values = logits_slice(&logits)?;
        for j in first..window - 1 {
            nll.add(token_nll(
                &values[j * n_vocab..(j + 1) * n_vocab],
                tokens[start + j + 1],
            ));
        }
        write!(out, "[{}]{:.4},", w + 1, nll.perplexity())?;
        out.flush()?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Final estimate: PPL = {:.4} +/- {:.5}",
        nll.perplexity(),
        nll.uncertainty()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_of_uniform_logits_is_log_vocab() {
        let logits = [0.5f32; 8];
        assert!((token_nll(&logits, 3) - 8f64.ln()).abs() < 1e-12);
        let mut nll = Nll::default();
        nll.add(8f64.ln());
        nll.add(8f64.ln());
        assert!((nll.perplexity() - 8.0).abs() < 1e-9);
        assert!(nll.uncertainty().abs() < 1e-9);
    }
}
