//! Command-line front end: one module per subcommand.

mod bench;
mod bench_constrained;
mod chat;
mod constraint_args;
mod convert;
mod detokenize;
#[cfg(feature = "server")]
mod duration_arg;
mod engine_args;
mod info;
mod logits;
mod model_arg;
mod output_file;
mod perplexity;
mod quantize;
mod run;
mod sampling_args;
#[cfg(feature = "server")]
mod serve;
mod tokenize;
mod vocab_source;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// tempra: run and inspect GGUF language models.
#[derive(Debug, Parser)]
#[command(name = "tempra", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate text from a prompt.
    Run(run::RunArgs),
    /// Chat with a model in the terminal (its chat template; one message per line).
    Chat(chat::ChatArgs),
    /// Serve the model over an OpenAI-compatible HTTP API.
    #[cfg(feature = "server")]
    Serve(serve::ServeArgs),
    /// Print the logits of every position of a token sequence as JSON.
    Logits(logits::LogitsArgs),
    /// Measure prompt-processing and generation speed (as llama-bench does).
    Bench(bench::BenchArgs),
    /// Compute the perplexity of a text file (as llama-perplexity does; --ctx sets the
    /// window, default 512).
    Perplexity(perplexity::PerplexityArgs),
    /// Show a model's architecture, hyperparameters, vocabulary and tensors.
    Info(info::InfoArgs),
    /// Write a model (e.g. a llama2.c checkpoint with --tokenizer) as GGUF.
    Convert(convert::ConvertArgs),
    /// Quantize an F32/F16/BF16 model with llama.cpp's per-tensor type mixes.
    Quantize(quantize::QuantizeArgs),
    /// Print the token ids of a text.
    Tokenize(tokenize::TokenizeArgs),
    /// Print the text of token ids.
    Detokenize(detokenize::DetokenizeArgs),
}

/// Parses the command line and runs it; errors print one line on stderr.
pub(crate) fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {} (see `tempra --help`)", one_line_usage_error(&e));
            return ExitCode::from(2);
        }
    };
    let result: anyhow::Result<()> = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Chat(args) => chat::run(args),
        #[cfg(feature = "server")]
        Command::Serve(args) => serve::run(args),
        Command::Logits(args) => logits::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Perplexity(args) => perplexity::run(args),
        Command::Info(args) => info::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Quantize(args) => quantize::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Detokenize(args) => detokenize::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, `: `-separated, leaving out a cause whose text
/// the line already ends with (errors that print their source in their own message).
fn one_line_error(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

/// clap's error message without its usage block and tips, on one line.
fn one_line_usage_error(e: &clap::Error) -> String {
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "missing subcommand".to_string();
    }
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    message.join(" ").trim_start_matches("error: ").to_string()
}
