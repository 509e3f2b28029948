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
        "cargo xtask <command>\n\ncommands:\n  ci          the CI job: runs `.ci/run` (tools, fmt, clippy, tests, GPU tests on lavapipe, leak-check)\n  make-model  random-weight GGUF models (see `cargo xtask make-model --help`)\n  bench-facade  facade ops at LLM shapes on the CPU (or --backend gpu) backend vs the machine's peaks (see `cargo xtask bench-facade --help`)\n  leak-check  memory discipline: heap, pool, RSS, device buffers, valgrind (see `cargo xtask leak-check --help`)\n  train-demo  train the demo story model `tempra run` embeds (see `cargo xtask train-demo --help`)"
    );
}

/// Runs the CI job, `.ci/run` (one definition of CI: what runs on every landing).
fn ci() -> Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask sits inside the workspace")?;
    let start = Instant::now();
    let status = Command::new("bash")
        .arg(root.join(".ci/run"))
        .current_dir(root)
        .status()
        .context("starting bash .ci/run")?;
    println!("xtask: ci took {:.1}s", start.elapsed().as_secs_f64());
    if !status.success() {
        bail!(".ci/run failed ({status})");
    }
    Ok(())
}
