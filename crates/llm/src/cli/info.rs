//! `tempra info -m MODEL`: architecture, hyperparameters, vocabulary, tensors by dtype,
//! file size.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tempra_llm::gguf::keys;
use tempra_llm::model_config::{ExpertGating, ModelConfig, RopeScalingKind};
use tempra_llm::quantize::QuantType;
use tempra_llm::{LlmError, ModelFile, ModelFormat};
use tempra_tensor::{DType, RopeStyle};

use super::model_arg::ModelArgs;

/// Arguments of `tempra info`.
#[derive(Debug, clap::Args)]
pub(crate) struct InfoArgs {
    #[command(flatten)]
    model: ModelArgs,
}

/// Prints the summary of the model on stdout.
pub(crate) fn run(args: InfoArgs) -> anyhow::Result<()> {
    let model = args.model.open()?;
    let name = args.model.model.display().to_string();
    print!("{}", summary(&model, &name)?);
    Ok(())
}

/// `bytes` in the largest binary unit that keeps the number at least 1 (`1.41 MiB`).
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// The text `tempra info` prints.
fn summary(model: &ModelFile, name: &str) -> anyhow::Result<String> {
    let md = model.metadata();
    let mut out = String::new();
    let size = model.file_size();
    let format = match model.format() {
        ModelFormat::Gguf {
            version, alignment, ..
        } => format!("GGUF v{version}, alignment {alignment}"),
        ModelFormat::Llama2c => "llama2.c checkpoint".to_string(),
    };
    writeln!(out, "file:           {name}")?;
    writeln!(
        out,
        "format:         {format}, {size} bytes ({})",
        human_size(size)
    )?;
    if let Some(n) = md.opt_str(keys::GENERAL_NAME)? {
        writeln!(out, "name:           {n}")?;
    }
    if let Some(ft) = md.opt_u32(keys::GENERAL_FILE_TYPE)? {
        let known = QuantType::file_type_name(ft);
        writeln!(
            out,
            "file type:      {}",
            known.map_or_else(
                || format!("{ft}"),
                |q| format!("{} ({ft})", q.to_lowercase())
            )
        )?;
    }
    writeln!(out, "architecture:   {}", model.architecture()?)?;
    match ModelConfig::from_metadata(md) {
        Ok(c) => hyperparameters(&mut out, &c)?,
        // A vocabulary-only file has no hyperparameters to show.
        Err(LlmError::MissingKey { .. }) if model.tensor_infos().is_empty() => {
            writeln!(out, "hyperparameters: none (vocabulary-only file)")?;
        }
        Err(e) => return Err(e.into()),
    }
    vocabulary(&mut out, md)?;
    tensors(&mut out, model)?;
    Ok(out)
}

fn hyperparameters(out: &mut String, c: &ModelConfig) -> anyhow::Result<()> {
    writeln!(out, "context:        {}", c.context_length)?;
    writeln!(out, "embedding:      {}", c.embedding_length)?;
    writeln!(out, "blocks:         {}", c.block_count)?;
    writeln!(out, "feed-forward:   {}", c.feed_forward_length)?;
    writeln!(
        out,
        "heads:          {} query, {} key/value (GQA {}), head dim {} (k) {} (v)",
        c.head_count,
        c.head_count_kv,
        c.gqa(),
        c.key_length,
        c.value_length
    )?;
    let style = match c.rope.style {
        RopeStyle::Interleaved => "interleaved",
        RopeStyle::Neox => "neox",
    };
    let scaling = match c.rope.scaling {
        RopeScalingKind::None => "no scaling".to_string(),
        RopeScalingKind::Linear { factor } => format!("linear scaling x{factor}"),
        RopeScalingKind::Yarn { factor, .. } => format!(
            "yarn scaling x{factor} from {}",
            c.rope.original_context_length
        ),
        RopeScalingKind::LongRope => {
            format!("longrope scaling from {}", c.rope.original_context_length)
        }
    };
    write!(
        out,
        "rope:           {style}, {} dims, base {}",
        c.rope.dimension_count, c.rope.freq_base
    )?;
    if let Some(local) = c.rope.freq_base_sliding {
        write!(out, " (sliding layers {local})")?;
    }
    writeln!(out, ", {scaling}")?;
    writeln!(out, "rms eps:        {:e}", c.rms_norm_eps)?;
    writeln!(out, "attn scale:     {}", c.attention_scale)?;
    if let Some(w) = c.sliding_window {
        let pattern = c
            .sliding_window_pattern
            .map_or("all layers".to_string(), |p| {
                format!("{} of every {p} layers", p.saturating_sub(1))
            });
        writeln!(out, "sliding window: {w} on {pattern}")?;
    }
    if c.attn_logit_softcap.is_some() || c.final_logit_softcap.is_some() {
        let show = |v: Option<f32>| v.map_or("none".to_string(), |v| v.to_string());
        writeln!(
            out,
            "soft-caps:      attention {}, final {}",
            show(c.attn_logit_softcap),
            show(c.final_logit_softcap)
        )?;
    }
    if let Some(moe) = &c.moe {
        writeln!(
            out,
            "experts:        {} per block, {} used per token, FFN width {}{}{}",
            moe.expert_count,
            moe.experts_used,
            moe.expert_ffn_length,
            match moe.shared_ffn_length {
                Some(w) => format!(", shared expert of width {w}"),
                None => String::new(),
            },
            match moe.gating {
                ExpertGating::Softmax => "",
                ExpertGating::Sigmoid => ", sigmoid gating",
                ExpertGating::SoftmaxChosen => ", softmax over the chosen experts",
            }
        )?;
    }
    Ok(())
}

fn vocabulary(out: &mut String, md: &tempra_llm::gguf::Metadata) -> anyhow::Result<()> {
    let Some(model) = md.opt_str(keys::TOKENIZER_MODEL)? else {
        writeln!(out, "vocabulary:     none")?;
        return Ok(());
    };
    let count = md.opt_array(keys::TOKENIZER_TOKENS)?.map_or(0, |a| a.len());
    write!(out, "vocabulary:     {count} tokens, {model}")?;
    if let Some(pre) = md.opt_str(keys::TOKENIZER_PRE)? {
        write!(out, " (pre {pre})")?;
    }
    for (label, key) in [
        ("bos", keys::TOKENIZER_BOS_ID),
        ("eos", keys::TOKENIZER_EOS_ID),
        ("unk", keys::TOKENIZER_UNK_ID),
    ] {
        if let Some(id) = md.opt_u32(key)? {
            write!(out, ", {label} {id}")?;
        }
    }
    if let Some(merges) = md.opt_array(keys::TOKENIZER_MERGES)? {
        write!(out, ", {} merges", merges.len())?;
    }
    writeln!(out)?;
    Ok(())
}

fn tensors(out: &mut String, model: &ModelFile) -> anyhow::Result<()> {
    let mut by_dtype: BTreeMap<DType, (usize, u64)> = BTreeMap::new();
    let mut params = 0u64;
    for t in model.tensor_infos() {
        let slot = by_dtype.entry(t.dtype()).or_default();
        slot.0 += 1;
        slot.1 += t.byte_len;
        params += t.spec.elem_count() as u64;
    }
    let list: Vec<String> = by_dtype
        .iter()
        .map(|(dt, (n, bytes))| format!("{dt} {n} ({})", human_size(*bytes)))
        .collect();
    writeln!(
        out,
        "tensors:        {}: {}",
        model.tensor_infos().len(),
        list.join(", ")
    )?;
    let tied = model.has_tensor("token_embd.weight") && !model.has_tensor("output.weight");
    writeln!(
        out,
        "parameters:     {params} ({:.2} M){}",
        params as f64 / 1e6,
        if tied {
            ", output tied to token_embd"
        } else {
            ""
        }
    )?;
    Ok(())
}
