//! What the engine benches share: their settings from the environment and their model.

use std::sync::Arc;

use tempra_llm::engine::{LoadOptions, Model};
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

/// The number in the environment variable `name`, else `default`.
pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A bench's model, what it is, and the folder a random model lives in (kept while the
/// model is used): the GGUF file named by `{prefix}_MODEL`, else a random-weight Q4_0
/// llama of the shape named by `{prefix}_SHAPE` (default `110m`).
pub(crate) fn bench_model(
    prefix: &str,
    options: &LoadOptions,
) -> anyhow::Result<(Arc<Model>, String, Option<tempfile::TempDir>)> {
    if let Ok(path) = std::env::var(format!("{prefix}_MODEL")) {
        return Ok((
            Model::load(std::path::Path::new(&path), options)?,
            path,
            None,
        ));
    }
    let shape = std::env::var(format!("{prefix}_SHAPE")).unwrap_or_else(|_| "110m".into());
    let spec = RandomModelSpec::llama(ModelShape::parse(&shape)?).with_qtype(QuantType::Q4_0);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.gguf");
    std::fs::write(&path, write_random_model(&spec, Vec::new())?)?;
    let model = Model::load(&path, options)?;
    Ok((model, format!("random {shape} Q4_0"), Some(dir)))
}
