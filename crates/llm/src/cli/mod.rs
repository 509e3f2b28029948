//! Command-line front end: one module per subcommand.

mod convert;
mod info;
mod model_arg;
mod output_file;
mod quantize;

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
    /// Show a model's architecture, hyperparameters, vocabulary and tensors.
    Info(info::InfoArgs),
    /// Write a model (e.g. a llama2.c checkpoint with --tokenizer) as GGUF.
    Convert(convert::ConvertArgs),
    /// Quantize an F32/F16/BF16 model with llama.cpp's per-tensor type mixes.
    Quantize(quantize::QuantizeArgs),
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
            // One line: clap's first line (the error), not its usage block.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ");
            eprintln!("error: {first} (see `tempra --help`)");
            return ExitCode::from(2);
        }
    };
    let result: anyhow::Result<()> = match cli.command {
        Command::Info(args) => info::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Quantize(args) => quantize::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
