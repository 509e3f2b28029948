//! `cargo xtask make-model`: random-weight GGUF models of any size with a working
//! tokenizer, for tests and benchmarks (large ones are made on demand, never committed).

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tempra_llm::model_config::Arch;
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

pub(crate) const HELP: &str = "\
cargo xtask make-model [--arch llama] [--shape tiny|110m|1b|DIMS] [--dtype TYPE] [--seed N] [--vocab GGUF] -o FILE

  --shape   tiny (default; 2 layers, dim 256), 110m, 1b (TinyLlama-1.1B sizes),
            tiny-moe (tiny with 8 experts, 2 used), moe-2b (Qwen3-30B-A3B's form at 2.5 B:
            dim 1024, 24 layers, 16/4 heads, 64 experts of width 512, 8 used), or
            comma-separated overrides of tiny: dim=,layers=,heads=,kv_heads=,ffn=,vocab=,
            context=,tied=true|false,experts=,experts_used=,expert_ffn= (experts > 0 makes a
            Mixtral-form mixture of experts: llama with stacked ffn_*_exps and a router)
  --dtype   f32 (default), f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_m, q4_k_m,
            q5_k_m, q6_k, iq4_nl, iq4_xs (the _m and iq4 types use llama.cpp's
            per-tensor mixes)
  --seed    the generator seed (default 0): the same arguments give the same file
  --vocab   take the tokenizer (and so the vocabulary size) of this GGUF, e.g. llama.cpp's
            ggml-vocab-qwen2.gguf, instead of the synthetic one";

/// Parses the arguments after `make-model` and writes the model.
pub(crate) fn make_model(args: &[String]) -> Result<()> {
    let mut spec = RandomModelSpec::llama(ModelShape::TINY);
    let mut output: Option<PathBuf> = None;
    let mut vocab: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--arch" => spec.arch = Arch::from_name(value()?)?,
            "--shape" => spec.shape = ModelShape::parse(value()?)?,
            "--dtype" => spec.qtype = value()?.parse()?,
            "--seed" => {
                let v = value()?;
                spec.seed = v
                    .parse()
                    .with_context(|| format!("--seed {v} is not a number"))?;
            }
            "-o" | "--output" => output = Some(PathBuf::from(value()?)),
            "--vocab" => vocab = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{HELP}");
                return Ok(());
            }
            other => bail!("unknown make-model argument `{other}`\n\n{HELP}"),
        }
    }
    let Some(output) = output else {
        bail!("make-model needs -o FILE\n\n{HELP}")
    };
    if let Some(path) = vocab {
        let file =
            tempra_llm::ModelFile::open(&path).with_context(|| path.display().to_string())?;
        spec = spec
            .with_tokenizer_from(file.metadata())
            .with_context(|| path.display().to_string())?;
    }
    spec.validate()?;
    let start = Instant::now();
    let file = File::create(&output).with_context(|| format!("creating {}", output.display()))?;
    let writer = write_random_model(&spec, BufWriter::with_capacity(1 << 20, file))
        .with_context(|| format!("writing {}", output.display()))?;
    writer
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", output.display()))?;
    let size = std::fs::metadata(&output).map(|m| m.len()).unwrap_or(0);
    let active = if spec.shape.is_moe() {
        format!(
            ", {:.1}M active per token",
            spec.shape.active_parameter_count() as f64 / 1e6
        )
    } else {
        String::new()
    };
    println!(
        "xtask: wrote {} ({} {}, {:.1}M parameters{active}, seed {}): {:.1} MiB in {:.1}s",
        output.display(),
        spec.arch,
        spec.qtype,
        spec.shape.parameter_count() as f64 / 1e6,
        spec.seed,
        size as f64 / (1024.0 * 1024.0),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
