//! `tempra bench`: prompt-processing and generation speed measured as llama.cpp's
//! `llama-bench` measures them, with the machine's memory read bandwidth for context.
//!
//! - pp: `-p` tokens as one batch into an empty cache;
//! - tg: `-n` tokens one at a time into an empty cache;
//!
//! each run once to warm up, then `-r` times; the mean and sample standard deviation of
//! the per-run rates are reported. Tokens are pseudo-random ids (fixed seed), the first a
//! BOS where the model has one; nothing is sampled (the logits are computed and dropped).
//! With `--json-schema FILE` or `--grammar FILE`, decode is also measured with sampling
//! (a fixed seed unless `--seed` gives one), free and held to the grammar (see
//! `bench_constrained`).

use std::io::Write;
use std::time::Instant;

use anyhow::bail;
use tempra_llm::engine::{BackendKind, Model, Session};
use tempra_tensor::random::SplitMix64;

use crate::cli::bench_constrained::{self, ConstrainedRates};
use crate::cli::constraint_args::ConstraintArgs;
use crate::cli::engine_args::EngineArgs;
use crate::cli::sampling_args::SamplingArgs;

/// Arguments of `tempra bench`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("ctx", |a| a.help("Context length (default: -p plus -n, as llama-bench)")))]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Prompt tokens processed in one batch (0: skip the prompt test).
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_name = "N",
        default_value_t = 512
    )]
    n_prompt: usize,
    /// Tokens generated one at a time (0: skip the generation test).
    #[arg(short = 'n', long = "n-gen", value_name = "N", default_value_t = 128)]
    n_gen: usize,
    /// Repetitions of each test after the warm-up.
    #[arg(
        short = 'r',
        long = "repetitions",
        value_name = "N",
        default_value_t = 3
    )]
    repetitions: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    constraint: ConstraintArgs,
    /// Sampling of the constrained-decode tests.
    #[command(flatten)]
    sampling: SamplingArgs,
}

/// Mean and sample standard deviation of a test's per-run rates (tokens per second).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub(crate) mean: f64,
    pub(crate) sd: f64,
}

impl Rate {
    /// The mean and sample standard deviation of `samples` (at least one).
    pub(crate) fn of(samples: &[f64]) -> Rate {
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let sd = if samples.len() > 1 {
            (samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Rate { mean, sd }
    }
}

/// Runs `tempra bench`.
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.n_prompt == 0 && args.n_gen == 0 {
        bail!("nothing to measure: -p and -n are both 0");
    }
    if args.repetitions == 0 {
        bail!("-r must be at least 1");
    }
    // As llama-bench: a context of prompt + generation (the tests start empty each time).
    let mut engine = args.engine.clone();
    let needed = args.n_prompt.max(args.n_gen);
    let ctx = *engine.ctx.get_or_insert(args.n_prompt + args.n_gen);
    if ctx < needed {
        bail!("--ctx {ctx} is smaller than the {needed} tokens a test needs");
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; build with --release for representative figures");
    }
    let model = engine.load()?;
    let grammar = args.constraint.load(model.vocab())?;
    if grammar.is_some() && args.n_gen == 0 {
        bail!("--json-schema and --grammar measure decode: give -n");
    }
    let tokens = bench_tokens(&model, needed);
    let mut session = model.session()?;

    let pp = (args.n_prompt > 0)
        .then(|| {
            measure(args.repetitions, || {
                prompt_run(&mut session, &tokens[..args.n_prompt])
            })
        })
        .transpose()?;
    let tg = (args.n_gen > 0)
        .then(|| {
            measure(args.repetitions, || {
                gen_run(&mut session, &tokens[..args.n_gen])
            })
        })
        .transpose()?;
    let constrained = grammar
        .map(|g| {
            let sampling = args.sampling.config(args.sampling.seed_or(0x5eed));
            bench_constrained::measure(
                &model,
                &mut session,
                &g,
                &sampling,
                args.n_gen,
                args.repetitions,
            )
        })
        .transpose()?;
    drop(session);

    // Peak RSS before the bandwidth test's buffer raises it.
    let peak_rss_bytes = peak_rss_bytes();
    let pool_peak_bytes = model.autograd().ctx().pool_stats().peak_outstanding_bytes;
    let mem_bw_gbs = tempra_backend_cpu::memory_bandwidth::read_bandwidth_gbs(model.threads(), 5);
    let model_bytes = model.weights().bytes();
    let experts_used = model.config().moe.map_or(0, |m| m.experts_used);
    let active_bytes = model.weights().active_bytes(experts_used);
    let report = Report {
        model: &model,
        model_path: args.engine.model.model.display().to_string(),
        n_prompt: args.n_prompt,
        n_gen: args.n_gen,
        pp,
        tg,
        constrained,
        model_bytes,
        active_bytes,
        mem_bw_gbs,
        peak_rss_bytes,
        pool_peak_bytes,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        report.write_json(&mut out)?
    } else {
        report.write_table(&mut out)?
    }
    out.flush()?;
    Ok(())
}

/// `n` pseudo-random token ids (fixed seed), the first the BOS where there is one.
fn bench_tokens(model: &Model, n: usize) -> Vec<u32> {
    let vocab = model.config().vocab_size as u64;
    let mut rng = SplitMix64::new(0x7e47a);
    let mut tokens: Vec<u32> = (0..n).map(|_| (rng.next_u64() % vocab) as u32).collect();
    if let (Some(first), Some(bos)) = (tokens.first_mut(), model.vocab().bos()) {
        *first = bos;
    }
    tokens
}

/// One warm-up run, then `repetitions` timed ones; each run returns its tokens per second.
fn measure(
    repetitions: usize,
    mut run: impl FnMut() -> anyhow::Result<f64>,
) -> anyhow::Result<Rate> {
    run()?;
    let samples = (0..repetitions)
        .map(|_| run())
        .collect::<anyhow::Result<Vec<f64>>>()?;
    Ok(Rate::of(&samples))
}

/// The prompt as one batch into an empty cache.
fn prompt_run(session: &mut Session, tokens: &[u32]) -> anyhow::Result<f64> {
    session.reset();
    let start = Instant::now();
    drop(session.prefill(tokens)?);
    Ok(tokens.len() as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

/// The tokens one at a time into an empty cache.
fn gen_run(session: &mut Session, tokens: &[u32]) -> anyhow::Result<f64> {
    session.reset();
    let start = Instant::now();
    for &t in tokens {
        drop(session.step(t)?);
    }
    Ok(tokens.len() as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

/// `VmHWM` (the resident set's high-water mark) from /proc/self/status, in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Everything `tempra bench` reports.
struct Report<'a> {
    model: &'a Model,
    model_path: String,
    n_prompt: usize,
    n_gen: usize,
    pp: Option<Rate>,
    tg: Option<Rate>,
    constrained: Option<ConstrainedRates>,
    model_bytes: usize,
    /// The weight bytes one decoded token reads (a mixture of experts' chosen experts).
    active_bytes: usize,
    mem_bw_gbs: f64,
    peak_rss_bytes: Option<u64>,
    pool_peak_bytes: usize,
}

impl Report<'_> {
    /// The rate at which decode reads the weights a token needs (the active bytes of a
    /// mixture of experts), in GB/s.
    fn tg_weight_read_gbs(&self) -> Option<f64> {
        self.tg.map(|tg| self.active_bytes as f64 * tg.mean / 1e9)
    }

    fn write_json(&self, out: &mut impl Write) -> anyhow::Result<()> {
        let value = serde_json::json!({
            "model": self.model_path,
            "arch": self.model.config().arch.name(),
            "weight_types": weight_types(self.model),
            "backend": backend_name(self.model),
            "adapter": self.model.gpu_adapter(),
            "threads": self.model.threads(),
            "n_prompt": self.n_prompt,
            "n_gen": self.n_gen,
            "pp_tok_s": self.pp.map(|r| r.mean),
            "pp_tok_s_sd": self.pp.map(|r| r.sd),
            "tg_tok_s": self.tg.map(|r| r.mean),
            "tg_tok_s_sd": self.tg.map(|r| r.sd),
            "model_bytes": self.model_bytes,
            "active_bytes": self.active_bytes,
            "mem_bw_gbs": self.mem_bw_gbs,
            "tg_weight_read_gbs": self.tg_weight_read_gbs(),
            "kv_type": self.model.kv_types().to_string(),
            "kv_cache_bytes": self.model.kv_cache_bytes(),
            "context_length": self.model.context_length(),
            "peak_rss_bytes": self.peak_rss_bytes,
            "pool_peak_bytes": self.pool_peak_bytes,
            "sampled_tok_s": self.constrained.map(|c| c.sampled.mean),
            "sampled_tok_s_sd": self.constrained.map(|c| c.sampled.sd),
            "constrained_tok_s": self.constrained.map(|c| c.constrained.mean),
            "constrained_tok_s_sd": self.constrained.map(|c| c.constrained.sd),
            "constrained_slowdown_percent": self.constrained.map(|c| c.slowdown_percent()),
            "choose_us_sampled": self.constrained.map(|c| c.choose_free.as_secs_f64() * 1e6),
            "choose_us_constrained": self.constrained.map(|c| c.choose_held.as_secs_f64() * 1e6),
            "masks_computed": self.constrained.map(|c| c.masks.computed),
            "masks_cached": self.constrained.map(|c| c.masks.cached),
            "mask_us_mean": self.constrained.map(|c| c.mask_us_mean()),
            "constrained_outputs": self.constrained.map(|c| c.outputs),
        });
        serde_json::to_writer(&mut *out, &value)?;
        writeln!(out)?;
        Ok(())
    }

    fn write_table(&self, out: &mut impl Write) -> anyhow::Result<()> {
        let config = self.model.config();
        let name = format!("{} {}", config.arch, weight_types(self.model));
        let size = format!("{:.2} MiB", self.model_bytes as f64 / (1 << 20) as f64);
        writeln!(out, "| model | size | threads | test | t/s |")?;
        writeln!(out, "| --- | ---: | ---: | ---: | ---: |")?;
        for (test, rate) in [
            (format!("pp{}", self.n_prompt), self.pp),
            (format!("tg{}", self.n_gen), self.tg),
        ] {
            if let Some(r) = rate {
                writeln!(
                    out,
                    "| {name} | {size} | {} | {test} | {:.2} ± {:.2} |",
                    self.model.threads(),
                    r.mean,
                    r.sd
                )?;
            }
        }
        if let Some(c) = &self.constrained {
            for (test, rate) in [
                (format!("tg{} sampled", self.n_gen), c.sampled),
                (format!("tg{} +grammar", self.n_gen), c.constrained),
            ] {
                writeln!(
                    out,
                    "| {name} | {size} | {} | {test} | {:.2} ± {:.2} |",
                    self.model.threads(),
                    rate.mean,
                    rate.sd
                )?;
            }
        }
        writeln!(out)?;
        if let Some(c) = &self.constrained {
            writeln!(
                out,
                "grammar: {:+.1}% decode time; choosing a token {:.1} µs sampled, {:.1} µs held to the grammar; {} masks computed, {} from the cache, {:.1} µs each; {} outputs completed",
                c.slowdown_percent(),
                c.choose_free.as_secs_f64() * 1e6,
                c.choose_held.as_secs_f64() * 1e6,
                c.masks.computed,
                c.masks.cached,
                c.mask_us_mean(),
                c.outputs
            )?;
        }
        if let Some(adapter) = self.model.gpu_adapter() {
            writeln!(out, "GPU adapter: {adapter}")?;
        }
        writeln!(
            out,
            "memory read bandwidth ({} threads): {:.1} GB/s",
            self.model.threads(),
            self.mem_bw_gbs
        )?;
        if let Some(gbs) = self.tg_weight_read_gbs() {
            writeln!(
                out,
                "decode reads the {} weights at {gbs:.1} GB/s ({:.0}% of the measured bandwidth)",
                if self.active_bytes < self.model_bytes {
                    format!("{} active", mib(self.active_bytes as u64))
                } else {
                    "model's".to_string()
                },
                100.0 * gbs / self.mem_bw_gbs.max(1e-9)
            )?;
        }
        writeln!(
            out,
            "KV cache: {} reserved ({} positions, {})",
            mib(self.model.kv_cache_bytes() as u64),
            self.model.context_length(),
            self.model.kv_types()
        )?;
        if let Some(rss) = self.peak_rss_bytes {
            writeln!(out, "peak RSS: {}", mib(rss))?;
        }
        writeln!(
            out,
            "pool peak outstanding: {}",
            mib(self.pool_peak_bytes as u64)
        )?;
        Ok(())
    }
}

/// The backend's name in the JSON report (`cpu`, `gpu`, `reference`).
fn backend_name(model: &Model) -> &'static str {
    match model.backend_kind() {
        BackendKind::Cpu => "cpu",
        BackendKind::Gpu => "gpu",
        BackendKind::Reference => "reference",
    }
}

fn mib(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
    }
}

/// The weight dtypes of the big matrices, most common first (`q4_0`, `q4_K+q6_K`).
fn weight_types(model: &Model) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for layer in &model.weights().layers {
        for w in [&layer.wq, &layer.wk, &layer.wv, &layer.wo]
            .into_iter()
            .chain(layer.ffn.vars())
            .filter(|w| w.rank() >= 2)
        {
            let name = w.tensor().dtype().to_string();
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => counts.push((name, 1)),
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts
        .into_iter()
        .map(|(n, _)| n)
        .collect::<Vec<_>>()
        .join("+")
}
