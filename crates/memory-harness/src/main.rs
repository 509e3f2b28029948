//! tempra-memory-harness: runs tempra's memory-discipline scenarios under a counting
//! global allocator and prints one JSON line per check (`check`, `figure`, `limit`,
//! `pass`, `note`) for `cargo xtask leak-check` to tabulate.
//!
//! ```text
//! cargo run --release -p tempra-memory-harness -- [--threads N] [--only SCENARIO]...
//! ```
//!
//! Scenarios: `decode` (steady-state decode and peak memory on the CPU engine), `train`
//! (a training step after the first), `teardown` (pool closed, heap back to its level),
//! `repeat` (100 generate-reset cycles, 20 load-run-drop cycles) and `gpu` (device
//! buffers after a trim). The counting allocator lives here, never in the libraries.

use anyhow::{Context, Result, bail};
use tempra_llm::quantize::QuantType;

use tempra_memory_harness::check::{self, Check, Unit};
use tempra_memory_harness::counting_alloc::CountingAlloc;
use tempra_memory_harness::models::{
    self, DECODE_SHAPE, ModelSource, ScratchDir, TRAIN_SHAPE, random_model,
};
use tempra_memory_harness::{process_memory, scenarios};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Every scenario, in the order they run.
const SCENARIOS: &[&str] = &["decode", "train", "teardown", "repeat", "gpu"];

/// What to run.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    threads: usize,
    only: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Args> {
    let mut parsed = Args {
        threads: 2,
        only: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--threads" => {
                let n = it.next().context("--threads needs a value")?;
                parsed.threads = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--threads: `{n}` is not a positive count"))?;
            }
            "--only" => {
                let name = it.next().context("--only needs a scenario name")?;
                if !SCENARIOS.contains(&name.as_str()) {
                    bail!(
                        "unknown scenario `{name}` (scenarios: {})",
                        SCENARIOS.join(", ")
                    );
                }
                parsed.only.push(name.clone());
            }
            other => {
                bail!("unknown argument `{other}` (usage: [--threads N] [--only SCENARIO]...)")
            }
        }
    }
    Ok(parsed)
}

/// The models: the tiny Q8_0 and F32 random models and, when present, stories260K.
struct Models {
    _dir: ScratchDir,
    tiny_q8: ModelSource,
    train: ModelSource,
    stories: Option<ModelSource>,
}

fn models() -> Result<Models> {
    let dir = ScratchDir::new()?;
    let tiny_q8 = random_model(&dir, "tiny-q8_0", DECODE_SHAPE, QuantType::Q8_0)?;
    let train = random_model(&dir, "train-f32", TRAIN_SHAPE, QuantType::F32)?;
    Ok(Models {
        _dir: dir,
        tiny_q8,
        train,
        stories: models::stories260k(),
    })
}

fn run_scenario(name: &str, models: &Models, threads: usize, out: &mut Vec<Check>) -> Result<()> {
    match name {
        "decode" => {
            scenarios::decode::run(&models.tiny_q8, threads, out)?;
            match &models.stories {
                Some(stories) => scenarios::decode::run(stories, threads, out),
                None => {
                    let required = std::env::var("REQUIRE_MODELS").is_ok_and(|v| v == "1");
                    out.push(Check::skipped(
                        "decode.stories260k",
                        required,
                        "skipped: models/stories260K not in the shared directory (TEMPRA_SHARED_DIR)",
                    ));
                    Ok(())
                }
            }
        }
        "train" => scenarios::training::run(&models.train, threads, out),
        "teardown" => scenarios::teardown::run(&models.tiny_q8, &models.train, threads, out),
        "repeat" => scenarios::repeated::run(&models.tiny_q8, threads, out),
        "gpu" => scenarios::gpu::run(&models.tiny_q8, out),
        other => bail!("unknown scenario `{other}`"),
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = parse_args(&args)?;
    let models = models()?;
    for &name in SCENARIOS {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == name) {
            continue;
        }
        eprintln!("memory-harness: {name}");
        let mut checks = Vec::new();
        if let Err(e) = run_scenario(name, &models, args.threads, &mut checks) {
            checks.push(
                Check::new(
                    format!("{name}.error"),
                    1.0,
                    Unit::Count,
                    check::Limit::AtMost(0.0),
                )
                .with_note(format!("the scenario failed: {e:#}")),
            );
        }
        for c in &checks {
            println!("{}", c.to_json_line());
        }
    }
    if let Some(peak) = process_memory::peak_rss_bytes() {
        println!(
            "{}",
            Check::info("process.peak_rss", peak as f64, Unit::Bytes)
                .with_note("VmHWM of the harness over all scenarios")
                .to_json_line()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args> {
        parse_args(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn parses_threads_and_scenarios() {
        let a = args(&["--threads", "3", "--only", "decode", "--only", "gpu"]).unwrap();
        assert_eq!(a.threads, 3);
        assert_eq!(a.only, ["decode", "gpu"]);
        assert_eq!(args(&[]).unwrap().threads, 2);
    }

    #[test]
    fn rejects_bad_arguments() {
        assert!(args(&["--threads", "0"]).is_err());
        assert!(args(&["--threads"]).is_err());
        assert!(args(&["--only", "nope"]).is_err());
        assert!(args(&["--bogus"]).is_err());
    }
}
