//! Test support that other crates' tests use too: random-weight GGUF models with a working
//! tokenizer ([`random_model`], [`write_random_model`]; `cargo xtask make-model` is the
//! command-line front end), and locating the shared real models ([`shared_file`]).
//!
//! ```
//! use tempra_llm::testing::{ModelShape, RandomModelSpec, random_model};
//! use tempra_llm::quantize::QuantType;
//!
//! let spec = RandomModelSpec::llama(ModelShape::TINY).with_qtype(QuantType::Q8_0).with_seed(7);
//! let model = random_model(&spec)?;
//! assert_eq!(model.tensor("blk.0.attn_q.weight")?.dtype(), tempra_tensor::DType::Q8_0);
//! # Ok::<(), tempra_llm::LlmError>(())
//! ```

mod model_shape;
mod random_model;
mod synthetic_vocab;

pub use model_shape::ModelShape;
pub use random_model::{RandomModelSpec, random_model, write_random_model};
pub use synthetic_vocab::{SPECIAL_AND_BYTE_TOKENS, SyntheticVocab};

use std::path::{Path, PathBuf};

/// The shared directory (`../shared` next to the repository): `TEMPRA_SHARED_DIR`, else
/// the path relative to this crate's manifest. `None` when it does not exist.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("TEMPRA_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
    };
    dir.is_dir().then_some(dir)
}

/// The shared file `relative` (e.g. `models/stories260K/stories260K.bin`) for a test.
/// When it is missing this prints why on stderr and returns `None`, so the test can
/// return early.
///
/// # Panics
///
/// When the file is missing and the environment sets `REQUIRE_MODELS=1` (as CI does):
/// a missing model is then a test failure, not a silent pass.
pub fn shared_file(relative: &str) -> Option<PathBuf> {
    let path = shared_dir().map(|d| d.join(relative));
    if let Some(path) = path.filter(|p| p.is_file()) {
        return Some(path);
    }
    let message = format!(
        "shared file `{relative}` not found (set TEMPRA_SHARED_DIR to the directory holding `models/`)"
    );
    if std::env::var("REQUIRE_MODELS").is_ok_and(|v| v == "1") {
        panic!("{message}; REQUIRE_MODELS=1 makes this a failure");
    }
    eprintln!("skipping: {message}");
    None
}
