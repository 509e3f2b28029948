//! `cargo xtask bench-facade`: every facade op at LLM shapes on the CPU backend, at 1
//! thread and at all threads, against the machine's peaks measured in the same run.
//!
//! Prints a table (op, shape, dtype, threads, median time, GFLOP/s, GB/s, % of peak) and
//! writes `target/bench-facade.json`:
//! `{"machine": {"mem_bw_gbs", "fma_gflops", "threads", ...}, "results": [{"op", "shape",
//! "dtype", "threads", "median_ns", "gflops", "gbs", "pct_of_peak"}, ...]}`. Memory-bound
//! rows (one-row `linear`, norms, softmax, rope, one-query attention) count against the
//! bandwidth peak at their thread count, compute-bound rows against the FMA peak.
//!
//! `--baseline FILE` compares with a saved run and exits non-zero when a row's median
//! time grew by more than `--threshold` percent (default 10). `--quick` runs fewer,
//! shorter repetitions; `--filter TEXT` keeps rows whose op or dtype contains TEXT;
//! `--out FILE` writes the JSON elsewhere. `--backend gpu` runs the same cases on the GPU
//! backend (`bench_facade_gpu`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tempra_backend_cpu::CpuBackend;
use tempra_backend_cpu::workers::default_threads;
use tempra_tensor::random::SplitMix64;
use tempra_tensor::tempra_pool::HostPool;
use tempra_tensor::{AttentionParams, DType, ExecContext, RopeConfig, RopeStyle, Tensor};

use crate::machine_peaks::{self, Peaks};

const USAGE: &str = "cargo xtask bench-facade [--backend cpu|gpu] [--quick] [--baseline FILE] [--threshold PCT] [--filter TEXT] [--out FILE]";

/// Command-line options.
pub(crate) struct Options {
    /// `--backend gpu`: run on the GPU backend (`bench_facade_gpu`).
    gpu: bool,
    quick: bool,
    pub(crate) baseline: Option<PathBuf>,
    pub(crate) threshold_pct: f64,
    filter: Option<String>,
    pub(crate) out: PathBuf,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options> {
        let mut o = Options {
            gpu: false,
            quick: false,
            baseline: None,
            threshold_pct: 10.0,
            filter: None,
            out: PathBuf::from("target/bench-facade.json"),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = |name: &str| {
                it.next()
                    .cloned()
                    .with_context(|| format!("{name} needs a value\n{USAGE}"))
            };
            match a.as_str() {
                "--quick" => o.quick = true,
                "--backend" => match value("--backend")?.as_str() {
                    "cpu" => o.gpu = false,
                    "gpu" => o.gpu = true,
                    other => bail!("--backend takes cpu or gpu, not `{other}`"),
                },
                "--baseline" => o.baseline = Some(PathBuf::from(value("--baseline")?)),
                "--threshold" => {
                    o.threshold_pct = value("--threshold")?
                        .parse()
                        .context("--threshold takes a percentage")?
                }
                "--filter" => o.filter = Some(value("--filter")?),
                "--out" => o.out = PathBuf::from(value("--out")?),
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => bail!("unknown option `{other}`\n{USAGE}"),
            }
        }
        Ok(o)
    }
}

/// What limits a row: its percentage is of the bandwidth or of the FMA peak.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Memory,
    Compute,
}

/// One measured row.
pub(crate) struct Row {
    pub(crate) op: &'static str,
    pub(crate) shape: String,
    pub(crate) dtype: String,
    pub(crate) threads: usize,
    pub(crate) median_ns: f64,
    pub(crate) gflops: Option<f64>,
    pub(crate) gbs: Option<f64>,
    pub(crate) bound: Bound,
    pub(crate) pct_of_peak: f64,
}

/// A benchmark case: what it is, its work, and the call to time.
struct Case {
    op: &'static str,
    shape: String,
    dtype: String,
    bound: Bound,
    flops: Option<f64>,
    bytes: Option<f64>,
}

/// Runs the suite.
pub(crate) fn bench_facade(args: &[String]) -> Result<()> {
    let o = Options::parse(args)?;
    if o.gpu {
        return crate::bench_facade_gpu::run(&o);
    }
    let all = default_threads().max(1);
    let thread_counts: Vec<usize> = if all > 1 { vec![1, all] } else { vec![1] };
    println!(
        "measuring machine peaks ({} run)...",
        if o.quick { "quick" } else { "full" }
    );
    let peaks: Vec<(usize, Peaks)> = thread_counts
        .iter()
        .map(|&t| (t, machine_peaks::measure(t, o.quick)))
        .collect();
    for (t, p) in &peaks {
        println!(
            "  {t} thread(s): read bandwidth {:.1} GB/s, FMA {:.1} GFLOP/s",
            p.mem_bw_gbs, p.fma_gflops
        );
    }
    let contexts: Vec<(usize, ExecContext)> = thread_counts
        .iter()
        .map(|&t| {
            (
                t,
                ExecContext::new(Arc::new(CpuBackend::with_threads(HostPool::host(), t))),
            )
        })
        .collect();
    let mut suite = Suite {
        o: &o,
        contexts: &contexts,
        rows: Vec::new(),
        llc: tempra_backend_cpu::memory_bandwidth::last_level_cache_bytes(),
        place: &Ok,
        sync: &|| Ok(()),
    };
    suite.run_all()?;
    let mut rows = suite.rows;
    // Measured again at the end; the best of both is the machine's peak (on a shared
    // machine the load varies during the run, so the percentages are lower bounds).
    println!("measuring machine peaks again...");
    let peaks: Vec<(usize, Peaks)> = peaks
        .iter()
        .map(|&(t, p)| {
            let q = machine_peaks::measure(t, o.quick);
            (
                t,
                Peaks {
                    mem_bw_gbs: p.mem_bw_gbs.max(q.mem_bw_gbs),
                    fma_gflops: p.fma_gflops.max(q.fma_gflops),
                },
            )
        })
        .collect();
    for (t, p) in &peaks {
        println!(
            "  {t} thread(s): read bandwidth {:.1} GB/s, FMA {:.1} GFLOP/s (best of both)",
            p.mem_bw_gbs, p.fma_gflops
        );
    }
    for r in &mut rows {
        if let Some(&(_, p)) = peaks.iter().find(|(t, _)| *t == r.threads) {
            r.pct_of_peak = match r.bound {
                Bound::Memory => 100.0 * r.gbs.unwrap_or(0.0) / p.mem_bw_gbs,
                Bound::Compute => 100.0 * r.gflops.unwrap_or(0.0) / p.fma_gflops,
            };
        }
    }
    print_table(&rows);
    let (t_all, p_all) = peaks.last().copied().unwrap_or((
        1,
        Peaks {
            mem_bw_gbs: 0.0,
            fma_gflops: 0.0,
        },
    ));
    let p_one = peaks[0].1;
    let json = json!({
        "machine": {
            "mem_bw_gbs": p_all.mem_bw_gbs,
            "fma_gflops": p_all.fma_gflops,
            "threads": t_all,
            "mem_bw_gbs_1t": p_one.mem_bw_gbs,
            "fma_gflops_1t": p_one.fma_gflops,
            "isa": tempra_backend_cpu::Isa::detect().name(),
        },
        "results": rows.iter().map(|r| json!({
            "op": r.op,
            "shape": r.shape,
            "dtype": r.dtype,
            "threads": r.threads,
            "median_ns": r.median_ns,
            "gflops": r.gflops,
            "gbs": r.gbs,
            "pct_of_peak": r.pct_of_peak,
        })).collect::<Vec<_>>(),
    });
    if let Some(dir) = o.out.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&o.out, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("writing {}", o.out.display()))?;
    println!("wrote {}", o.out.display());
    if let Some(baseline) = &o.baseline {
        compare(baseline, &rows, o.threshold_pct)?;
    }
    Ok(())
}

/// The suite's state: options, one context per thread count, peaks, results.
pub(crate) struct Suite<'a> {
    pub(crate) o: &'a Options,
    pub(crate) contexts: &'a [(usize, ExecContext)],
    pub(crate) rows: Vec<Row>,
    pub(crate) llc: usize,
    /// Puts an input where the backend reads it (the GPU: uploaded once, untimed).
    pub(crate) place: &'a dyn Fn(Tensor) -> Result<Tensor>,
    /// Waits for the backend's queued work (the GPU), inside the timing.
    pub(crate) sync: &'a dyn Fn() -> Result<()>,
}

impl Suite<'_> {
    fn wanted(&self, op: &str, dtype: &str) -> bool {
        self.o
            .filter
            .as_deref()
            .is_none_or(|f| op.contains(f) || dtype.contains(f))
    }

    /// Times `call` on every context and records a row per thread count.
    fn measure(
        &mut self,
        case: &Case,
        mut call: impl FnMut(&ExecContext) -> Result<()>,
    ) -> Result<()> {
        let sync = self.sync;
        for (threads, ctx) in self.contexts {
            let median = time_median(self.o.quick, || {
                call(ctx)?;
                sync()
            })?;
            let secs = median.as_secs_f64();
            let gflops = case.flops.map(|f| f / secs / 1e9);
            let gbs = case.bytes.map(|b| b / secs / 1e9);
            let row = Row {
                op: case.op,
                shape: case.shape.clone(),
                dtype: case.dtype.clone(),
                threads: *threads,
                median_ns: secs * 1e9,
                gflops,
                gbs,
                bound: case.bound,
                pct_of_peak: 0.0,
            };
            println!(
                "  {:<10} {:<22} {:<6} {:>2}t {:>11}",
                row.op,
                row.shape,
                row.dtype,
                row.threads,
                format_time(row.median_ns)
            );
            self.rows.push(row);
        }
        Ok(())
    }

    pub(crate) fn run_all(&mut self) -> Result<()> {
        self.linear_cases()?;
        self.matmul_cases()?;
        self.row_op_cases()?;
        self.attention_cases()?;
        Ok(())
    }

    fn linear_cases(&mut self) -> Result<()> {
        let dtypes = [
            DType::F32,
            DType::F16,
            DType::Q8_0,
            DType::Q4_0,
            DType::Q4K,
            DType::Q6K,
        ];
        let shapes: &[(usize, usize)] = if self.o.quick {
            &[(2048, 2048), (2048, 5632)]
        } else {
            &[(2048, 2048), (2048, 5632), (5632, 2048)]
        };
        let reference = ExecContext::reference();
        for &dtype in &dtypes {
            if !self.wanted("linear", dtype.name()) {
                continue;
            }
            for &(k, n) in shapes {
                let file_weight = weight(&reference, n, k, dtype, 17)?;
                // The layout as files store it, then the backend's prepared layout (what
                // the engines run, e.g. q4_0_r8 on the CPU) when it has one.
                let prepared = match self.contexts.first() {
                    Some((_, ctx)) => ctx.prepare_weight(&file_weight)?,
                    None => None,
                };
                for w in std::iter::once(file_weight).chain(prepared) {
                    self.linear_case(w, n, k)?;
                }
            }
        }
        Ok(())
    }

    /// The decode (one row, weights from memory) and prefill (512 rows) cases of one
    /// `[n, k]` weight.
    fn linear_case(&mut self, w: Tensor, n: usize, k: usize) -> Result<()> {
        let dtype = w.dtype();
        let w_bytes = dtype.bytes_for(n * k).context("weight size")? as f64;
        // Decode: enough weight copies to overflow the last-level cache, so the
        // weights stream from memory as in a real model.
        let copies = ((3 * self.llc) as f64 / w_bytes).ceil().clamp(1.0, 64.0) as usize;
        let ws = copy_weights(&w, copies)?
            .into_iter()
            .map(self.place)
            .collect::<Result<Vec<_>>>()?;
        let x1 = (self.place)(Tensor::owned_from_slice(&normal(k, 1), &[1, k])?)?;
        let mut turn = 0usize;
        let case = Case {
            op: "linear",
            shape: format!("m1 k{k} n{n}"),
            dtype: dtype.name().into(),
            bound: Bound::Memory,
            flops: Some(2.0 * (n * k) as f64),
            bytes: Some(w_bytes),
        };
        self.measure(&case, |ctx| {
            turn += 1;
            ctx.linear(&x1, &ws[turn % ws.len()], None)?;
            Ok(())
        })?;
        drop(ws);
        let m = 512;
        let x = (self.place)(Tensor::owned_from_slice(&normal(m * k, 2), &[m, k])?)?;
        let w = (self.place)(w)?;
        let case = Case {
            op: "linear",
            shape: format!("m{m} k{k} n{n}"),
            dtype: dtype.name().into(),
            bound: Bound::Compute,
            flops: Some(2.0 * (m * n * k) as f64),
            bytes: Some(w_bytes),
        };
        self.measure(&case, |ctx| {
            ctx.linear(&x, &w, None)?;
            Ok(())
        })?;
        Ok(())
    }

    fn matmul_cases(&mut self) -> Result<()> {
        if !self.wanted("matmul", "f32") {
            return Ok(());
        }
        for n in [1024usize, 2048] {
            let a = (self.place)(Tensor::owned_from_slice(&normal(n * n, 3), &[n, n])?)?;
            let b = (self.place)(Tensor::owned_from_slice(&normal(n * n, 4), &[n, n])?)?;
            let case = Case {
                op: "matmul",
                shape: format!("{n}x{n}x{n}"),
                dtype: "f32".into(),
                bound: Bound::Compute,
                flops: Some(2.0 * (n * n * n) as f64),
                bytes: Some(3.0 * (n * n * 4) as f64),
            };
            self.measure(&case, |ctx| {
                ctx.matmul(&a, &b)?;
                Ok(())
            })?;
        }
        Ok(())
    }

    fn row_op_cases(&mut self) -> Result<()> {
        let (rows, width) = (512usize, 2048usize);
        let x = (self.place)(Tensor::owned_from_slice(
            &normal(rows * width, 5),
            &[rows, width],
        )?)?;
        let in_out = 2.0 * (rows * width * 4) as f64;
        if self.wanted("rms_norm", "f32") {
            let w = (self.place)(Tensor::owned_from_slice(&normal(width, 6), &[width])?)?;
            let case = Case {
                op: "rms_norm",
                shape: format!("{rows}x{width}"),
                dtype: "f32".into(),
                bound: Bound::Memory,
                flops: Some(4.0 * (rows * width) as f64),
                bytes: Some(in_out),
            };
            self.measure(&case, |ctx| {
                ctx.rms_norm(&x, &w, 1e-6)?;
                Ok(())
            })?;
        }
        if self.wanted("softmax", "f32") {
            let case = Case {
                op: "softmax",
                shape: format!("{rows}x{width}"),
                dtype: "f32".into(),
                bound: Bound::Memory,
                flops: None,
                bytes: Some(in_out),
            };
            self.measure(&case, |ctx| {
                ctx.softmax(&x)?;
                Ok(())
            })?;
        }
        if self.wanted("rope", "f32") {
            let (heads, dim) = (32usize, 64usize);
            let xr = x.reshape(&[rows, heads, dim])?;
            let positions: Vec<u32> = (0..rows as u32).collect();
            let pos = (self.place)(Tensor::owned_from_slice(&positions, &[rows])?)?;
            let config = RopeConfig::new(dim, 10_000.0, RopeStyle::Neox);
            let case = Case {
                op: "rope",
                shape: format!("{rows}x{heads}x{dim}"),
                dtype: "f32".into(),
                bound: Bound::Memory,
                flops: None,
                bytes: Some(in_out),
            };
            self.measure(&case, |ctx| {
                ctx.rope(&xr, &pos, &config, None)?;
                Ok(())
            })?;
        }
        Ok(())
    }

    fn attention_cases(&mut self) -> Result<()> {
        if !self.wanted("attention", "f16") {
            return Ok(());
        }
        // A GQA model's heads (1b Llama: eight query heads per KV head, so a decode tile
        // has eight rows) and a model without GQA (110m Llama: one row per tile).
        for (hq, hkv, tqs) in [(32usize, 4usize, &[1usize, 512][..]), (12, 12, &[1][..])] {
            self.attention_shape(hq, hkv, tqs)?;
        }
        Ok(())
    }

    /// Attention of `tqs` queries over 2048 cached f16 keys with `hq` query and `hkv` KV
    /// heads of 64 values.
    fn attention_shape(&mut self, hq: usize, hkv: usize, tqs: &[usize]) -> Result<()> {
        let (keys, d) = (2048usize, 64usize);
        let to_f16 = |v: Vec<f32>| v.into_iter().map(half::f16::from_f32).collect::<Vec<_>>();
        let k = (self.place)(Tensor::owned_from_slice(
            &to_f16(normal(keys * hkv * d, 7)),
            &[keys, hkv, d],
        )?)?;
        let v = (self.place)(Tensor::owned_from_slice(
            &to_f16(normal(keys * hkv * d, 8)),
            &[keys, hkv, d],
        )?)?;
        let kv_bytes = 2.0 * (keys * hkv * d * 2) as f64;
        for &tq in tqs {
            let q = (self.place)(Tensor::owned_from_slice(
                &normal(tq * hq * d, 9),
                &[tq, hq, d],
            )?)?;
            let params = AttentionParams::causal(d, keys - tq);
            // Visible (query, key) pairs under the causal mask.
            let pairs: usize = (0..tq).map(|i| keys - tq + i + 1).sum();
            let case = Case {
                op: "attention",
                shape: format!("q{tq} kv{keys} h{hq}/{hkv} d{d}"),
                dtype: "f16kv".into(),
                bound: if tq == 1 {
                    Bound::Memory
                } else {
                    Bound::Compute
                },
                flops: Some(4.0 * (pairs * hq * d) as f64),
                bytes: Some(kv_bytes),
            };
            self.measure(&case, |ctx| {
                ctx.attention(&q, &k, &v, &params)?;
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// The median of timed calls after one warm-up call: as many calls as fit a time budget
/// (0.3 s quick, 2 s full), at least 3 (1 when a call takes over 5 s), at most 11 quick
/// or 31 full.
fn time_median(quick: bool, mut call: impl FnMut() -> Result<()>) -> Result<Duration> {
    let start = Instant::now();
    call()?;
    let first = start.elapsed().as_secs_f64().max(1e-9);
    let (budget, max_reps) = if quick { (0.3, 11) } else { (2.0, 31) };
    let min_reps = if first > 5.0 { 1 } else { 3 };
    let reps = ((budget / first) as usize).clamp(min_reps, max_reps);
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        call()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// `n` standard-normal values from `seed`.
fn normal(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.next_normal() as f32 * 0.5).collect()
}

/// A random `[n, k]` weight of `dtype` (quantized by the reference backend).
fn weight(reference: &ExecContext, n: usize, k: usize, dtype: DType, seed: u64) -> Result<Tensor> {
    let values = normal(n * k, seed);
    Ok(match dtype {
        DType::F32 => Tensor::owned_from_slice(&values, &[n, k])?,
        DType::F16 => {
            let v: Vec<half::f16> = values.iter().map(|&x| half::f16::from_f32(x)).collect();
            Tensor::owned_from_slice(&v, &[n, k])?
        }
        q => {
            let x = Tensor::owned_from_slice(&values, &[n, k])?;
            let quantized = reference.quantize(&x, q)?;
            // Owned (not pooled) storage, as model weights are.
            let bytes = quantized.storage().host_bytes()?
                [..q.bytes_for(n * k).context("weight size")?]
                .to_vec();
            owned_bytes(&bytes, &[n, k], q)?
        }
    })
}

/// `copies` weights with the contents of `w` in separate owned buffers.
fn copy_weights(w: &Tensor, copies: usize) -> Result<Vec<Tensor>> {
    let bytes = w.layout().bytes_spanned();
    let src = &w.storage().host_bytes()?[..bytes];
    (0..copies)
        .map(|_| owned_bytes(src, w.dims(), w.dtype()))
        .collect()
}

/// An owned contiguous tensor holding `bytes`.
fn owned_bytes(bytes: &[u8], dims: &[usize], dtype: DType) -> Result<Tensor> {
    let mut t = Tensor::owned_zeros(dims, dtype)?;
    let dst = t.storage_mut().context("fresh tensor")?.host_bytes_mut()?;
    dst[..bytes.len()].copy_from_slice(bytes);
    Ok(t)
}

fn format_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

pub(crate) fn print_table(rows: &[Row]) {
    println!(
        "\n| op | shape | dtype | threads | median | GFLOP/s | GB/s | % of peak |\n|---|---|---|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        // NaN: no known peak (a GPU adapter without published figures).
        let pct = if r.pct_of_peak.is_finite() {
            format!("{:.0}%", r.pct_of_peak)
        } else {
            "-".to_string()
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {pct} |",
            r.op,
            r.shape,
            r.dtype,
            r.threads,
            format_time(r.median_ns),
            num(r.gflops),
            num(r.gbs),
        );
    }
}

/// Compares with a saved run; an error when a row slowed down by more than
/// `threshold_pct` percent.
pub(crate) fn compare(path: &PathBuf, rows: &[Row], threshold_pct: f64) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading baseline {}", path.display()))?;
    let base: Value = serde_json::from_str(&text)
        .with_context(|| format!("parsing baseline {}", path.display()))?;
    let results = base["results"]
        .as_array()
        .context("baseline has no `results` array")?;
    let key = |v: &Value| {
        (
            v["op"].as_str().unwrap_or("").to_string(),
            v["shape"].as_str().unwrap_or("").to_string(),
            v["dtype"].as_str().unwrap_or("").to_string(),
            v["threads"].as_u64().unwrap_or(0) as usize,
        )
    };
    println!(
        "\ncompared with {} (threshold +{threshold_pct}%):",
        path.display()
    );
    let mut regressions = 0;
    for r in rows {
        let k = (
            r.op.to_string(),
            r.shape.clone(),
            r.dtype.clone(),
            r.threads,
        );
        let Some(old) = results
            .iter()
            .find(|v| key(v) == k)
            .and_then(|v| v["median_ns"].as_f64())
        else {
            continue;
        };
        let change = 100.0 * (r.median_ns / old - 1.0);
        let flag = if change > threshold_pct {
            regressions += 1;
            "  REGRESSION"
        } else {
            ""
        };
        println!(
            "  {} {} {} {}t: {:+.1}%{flag}",
            r.op, r.shape, r.dtype, r.threads, change
        );
    }
    if regressions > 0 {
        bail!("{regressions} row(s) slower than the baseline by more than {threshold_pct}%");
    }
    println!("no regression beyond {threshold_pct}%");
    Ok(())
}
