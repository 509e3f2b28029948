//! Command-line front end: one module per subcommand.

mod convert;
mod detokenize;
mod engine_args;
mod info;
mod model_arg;
mod output_file;
mod quantize;
mod run;
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
        Command::Info(args) => info::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Quantize(args) => quantize::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Detokenize(args) => detokenize::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
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
