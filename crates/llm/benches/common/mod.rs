//! What the engine benches share: their settings from the environment, their model and
//! their medians.

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

/// The median of `values` (the upper one of an even count; at least one value).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A bench's model of `context_length` positions, what it is, and the folder a random
/// model lives in (kept while the model is used): the GGUF file named by
/// `{prefix}_MODEL`, else a random-weight Q4_0 llama of the shape named by
/// `{prefix}_SHAPE` (default `110m`), on `{prefix}_THREADS` engine threads (default:
/// physical cores).
pub(crate) fn bench_model(
    prefix: &str,
    context_length: usize,
) -> anyhow::Result<(Arc<Model>, String, Option<tempfile::TempDir>)> {
    let options = LoadOptions {
        threads: std::env::var(format!("{prefix}_THREADS"))
            .ok()
            .and_then(|v| v.parse().ok()),
        context_length: Some(context_length),
        ..LoadOptions::default()
    };
    if let Ok(path) = std::env::var(format!("{prefix}_MODEL")) {
        return Ok((
            Model::load(std::path::Path::new(&path), &options)?,
            path,
            None,
        ));
    }
    let shape = std::env::var(format!("{prefix}_SHAPE")).unwrap_or_else(|_| "110m".into());
    let spec = RandomModelSpec::llama(ModelShape::parse(&shape)?).with_qtype(QuantType::Q4_0);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.gguf");
    std::fs::write(&path, write_random_model(&spec, Vec::new())?)?;
    let model = Model::load(&path, &options)?;
    Ok((model, format!("random {shape} Q4_0"), Some(dir)))
}
