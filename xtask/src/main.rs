//! `cargo xtask <command>`: tempra's project tasks.

mod bench_facade;
mod bench_facade_gpu;
mod leak_check;
mod machine_peaks;
mod make_model;
mod train_demo;

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The test command the README gives and `.ci/run` runs.
const TEST_ARGS: &[&str] = &["test", "--workspace", "--all-targets"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("make-model") => make_model::make_model(&args[1..]),
        Some("bench-facade") => bench_facade::bench_facade(&args[1..]),
        Some("train-demo") => train_demo::train_demo_command(&args[1..]),
        Some("leak-check") => leak_check::leak_check(&args[1..]),
        Some("help") | None => {
            print_help();
            Ok(())
        }
        Some(other) => {
            print_help();
            bail!("unknown xtask command `{other}`")
        }
    }
}

fn print_help() {
    println!(
        "cargo xtask <command>\n\ncommands:\n  ci          fmt check, clippy -D warnings, the test suite\n  make-model  random-weight GGUF models (see `cargo xtask make-model --help`)\n  bench-facade  facade ops at LLM shapes on the CPU (or --backend gpu) backend vs the machine's peaks (see `cargo xtask bench-facade --help`)\n  leak-check  memory discipline: heap, pool, RSS, device buffers, valgrind (see `cargo xtask leak-check --help`)\n  train-demo  train the demo story model `tempra run` embeds (see `cargo xtask train-demo --help`)"
    );
}

/// Runs `cargo` with `args`, printing how long it took.
fn cargo(stage: &str, args: &[&str]) -> Result<()> {
    let start = Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(args)
        .status()
        .with_context(|| format!("starting cargo for {stage}"))?;
    println!("xtask: {stage} took {:.1}s", start.elapsed().as_secs_f64());
    if !status.success() {
        bail!("{stage} failed ({status})");
    }
    Ok(())
}

fn ci() -> Result<()> {
    cargo("fmt", &["fmt", "--all", "--check"])?;
    cargo(
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    cargo("tests", TEST_ARGS)
}
