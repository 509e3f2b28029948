//! `tempra quantize -m IN.gguf -o OUT.gguf --type q4_k_m`: quantizes a model with
//! llama.cpp's per-tensor mixes, with a progress bar on stderr.

use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use tempra_llm::quantize::{QuantType, quantize_model};

use super::model_arg::ModelArgs;
use super::output_file::OutputFile;

/// Arguments of `tempra quantize`.
#[derive(Debug, clap::Args)]
pub(crate) struct QuantizeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Output GGUF file.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
    /// Target type: q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k,
    /// iq4_nl, iq4_xs, mxfp4_moe (experts in MXFP4, the rest Q8_0), f16, bf16 or f32.
    #[arg(short = 't', long = "type", value_name = "TYPE")]
    qtype: QuantType,
    /// Print each tensor's dtype change on stderr.
    #[arg(short, long)]
    verbose: bool,
}

/// Quantizes and reports on stderr.
pub(crate) fn run(args: QuantizeArgs) -> anyhow::Result<()> {
    let model = args.model.open()?;
    let total: u64 = model.tensor_infos().iter().map(|t| t.byte_len).sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {eta} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (out, mut writer) = OutputFile::create(&args.output)?;
    let infos = model.tensor_infos();
    let summary = quantize_model(&model, args.qtype, &mut writer, &mut |i, plan| {
        bar.inc(infos[i].byte_len);
        bar.set_message(plan.name.clone());
        if args.verbose {
            bar.suspend(|| {
                let note = if plan.fallback {
                    " (fallback: row length)"
                } else {
                    ""
                };
                eprintln!("{}: {} -> {}{note}", plan.name, plan.from, plan.to);
            });
        }
    })
    .with_context(|| format!("quantizing to {}", args.output.display()))?;
    bar.finish_and_clear();
    let bytes = out.commit(writer)?;
    eprintln!(
        "wrote {}: {} of {} tensors converted to {}{}, {:.2} MiB -> {:.2} MiB",
        args.output.display(),
        summary.converted,
        summary.tensors,
        args.qtype,
        if summary.fallbacks > 0 {
            format!(" ({} with fallback types)", summary.fallbacks)
        } else {
            String::new()
        },
        summary.bytes_in as f64 / (1024.0 * 1024.0),
        bytes as f64 / (1024.0 * 1024.0),
    );
    Ok(())
}
