//! `cargo xtask train-demo`: trains the demo story model with tempra itself and writes
//! it as GGUF (by default to the asset `tempra run` embeds).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tempra_llm::demo::{Progress, TrainConfig, train_demo};

/// Where the embedded model lives, relative to the workspace root.
const DEFAULT_OUT: &str = "crates/llm/assets/demo-stories.gguf";

const HELP: &str = "cargo xtask train-demo [--steps N] [--out FILE] [--seed S] [--batch B] [--seq-len T] [--threads N]

Trains the demo story model (tokenizer and Llama-architecture transformer) on generated
stories with tempra's own autograd, AdamW and a warmup + cosine schedule, on the CPU
backend, and writes a GGUF. Run it in a release build (cargo xtask runs one).

  --steps N     optimizer steps (default 700)
  --out FILE    output GGUF (default crates/llm/assets/demo-stories.gguf)
  --seed S      corpus, initialisation and sampling seed (default 2024)
  --batch B     sequences per step (default 8)
  --seq-len T   tokens per sequence (default 128)
  --threads N   CPU threads (default 2)";

/// Runs the command with its arguments.
pub(crate) fn train_demo_command(args: &[String]) -> Result<()> {
    let mut config = TrainConfig::default();
    let mut out = workspace_root().join(DEFAULT_OUT);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .with_context(|| format!("{name} needs a value (see --help)"))
        };
        match arg.as_str() {
            "--help" | "-h" => {
                println!("{HELP}");
                return Ok(());
            }
            "--steps" => config.steps = parse(value("--steps")?, "--steps")?,
            "--seed" => config.seed = parse(value("--seed")?, "--seed")?,
            "--batch" => config.batch = parse(value("--batch")?, "--batch")?,
            "--seq-len" => config.seq_len = parse(value("--seq-len")?, "--seq-len")?,
            "--threads" => config.threads = parse(value("--threads")?, "--threads")?,
            "--out" => out = PathBuf::from(value("--out")?),
            other => bail!("unknown argument `{other}` (see --help)"),
        }
    }
    if config.steps < config.warmup_steps * 2 {
        config.warmup_steps = (config.steps / 10).max(1);
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build trains very slowly; use `cargo xtask` (release)");
    }
    let bar = ProgressBar::new(config.steps as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} step {pos}/{len} [{bar:30}] {msg} ({elapsed} elapsed, eta {eta})",
        )?
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let report = train_demo(&config, &mut |p| match p {
        Progress::Stage(stage) => bar.set_message(stage.to_string()),
        Progress::Step(s) => {
            bar.set_position(s.step as u64);
            bar.set_message(format!(
                "loss {:.3}, lr {:.2e}, {:.0} tok/s",
                s.loss, s.lr, s.tokens_per_second
            ));
        }
    })?;
    bar.finish();
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&out, &report.gguf).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "wrote {} ({} bytes)\nparameters: {}\ntokens seen: {} ({} steps x {} x {}, from {} stories)\nfirst train loss: {:.4}\nfinal train loss (mean of the last tenth): {:.4}\nheld-out loss (F16 weights): {:.4}\ntraining time: {:.1}s, total {:.1}s",
        out.display(),
        report.gguf.len(),
        report.parameters,
        report.tokens_seen,
        config.steps,
        config.batch,
        config.seq_len,
        report.train_stories,
        report.first_train_loss,
        report.final_train_loss,
        report.held_out_loss,
        report.train_time.as_secs_f64(),
        report.total_time.as_secs_f64(),
    );
    Ok(())
}

fn parse<T: std::str::FromStr>(text: &str, name: &str) -> Result<T> {
    text.parse()
        .ok()
        .with_context(|| format!("{name}: `{text}` is not a valid number"))
}

/// The workspace root (xtask's parent directory).
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
