//! `tempra convert -m stories260K.bin --tokenizer tok512.bin -o OUT.gguf`: writes a
//! model (a llama2.c checkpoint, or any model tempra reads) as GGUF.

use std::path::PathBuf;

use anyhow::Context;

use super::model_arg::ModelArgs;
use super::output_file::OutputFile;

/// Arguments of `tempra convert`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConvertArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Output GGUF file.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: PathBuf,
}

/// Converts and reports on stderr.
pub(crate) fn run(args: ConvertArgs) -> anyhow::Result<()> {
    let model = args.model.open()?;
    let (out, writer) = OutputFile::create(&args.output)?;
    let writer = model
        .write_gguf(writer)
        .with_context(|| format!("writing {}", args.output.display()))?;
    let bytes = out.commit(writer)?;
    eprintln!(
        "wrote {}: {} tensors, {} metadata keys, {bytes} bytes",
        args.output.display(),
        model.tensor_infos().len(),
        model.metadata().len()
    );
    Ok(())
}
