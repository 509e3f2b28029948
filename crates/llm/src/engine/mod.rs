//! The LLM engines: weights, the transformer forward (written once over autograd `Var`s),
//! KV cache, sessions, the sampler and token generation.
//!
//! A [`Model`] holds the weights (zero-copy views of the file mapping) and the exec
//! context; each [`Session`] owns a KV cache allocated once for the context length;
//! [`Generation`] samples tokens after a prompt and streams their text, stopping at an
//! end-of-generation token, a stop string, `max_tokens`, a full context or a cancel flag.
//!
//! ```
//! use tempra_llm::engine::{Generation, LoadOptions, Model, SamplerConfig, Sampler, StopConditions};
//! use tempra_llm::tokenizer::TokenizeOptions;
//! # use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("model.gguf");
//! # let shape = ModelShape::parse("dim=64,layers=2,heads=4,ffn=128,vocab=300")?;
//! # std::fs::write(&path, write_random_model(&RandomModelSpec::llama(shape), Vec::new())?)?;
//!
//! let model = Model::load(&path, &LoadOptions { threads: Some(2), ..LoadOptions::default() })?;
//! let prompt = model.vocab().tokenize("Once upon a time", TokenizeOptions::default());
//! let mut session = model.session()?; // owns its KV cache (f16, the model's context)
//! let sampler = Sampler::new(SamplerConfig { seed: 42, ..SamplerConfig::default() });
//! let stop = StopConditions { max_tokens: Some(16), stop_strings: vec!["\n\n".into()], ..Default::default() };
//! let mut generation = Generation::new(&mut session, &prompt, sampler, stop)?;
//! let mut text = String::new();
//! for piece in generation.by_ref() {
//!     text.push_str(&piece?.text); // print it as it comes
//! }
//! text.push_str(&generation.take_remaining_text());
//! println!("{text} ({:?})", generation.finish_reason());
//! assert!(session.len() <= prompt.len() + 16); // the session keeps the conversation
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
#[cfg(feature = "gpu")]
mod device_weights;
mod embedding;
mod executor;
mod forward;
mod generation;
mod kv_cache;
mod logprobs;
mod model;
mod outputs;
mod sampler;
mod session;
mod step_arena;
mod weights;

pub use batch::{step_batch, step_spans, step_spans_rows};
pub use embedding::{Pooling, pool};
pub use executor::Executor;
pub use forward::{LogitRows, forward, forward_in};
pub use generation::{FinishReason, GeneratedPiece, Generation, StopConditions};
pub use kv_cache::{KvCache, KvTypes};
pub use logprobs::{LOGPROB_FLOOR, MAX_TOP_LOGPROBS, TokenLogprob, log_sum_exp, token_logprobs};
#[cfg(feature = "server")]
pub(crate) use model::available_memory;
pub use model::{BackendKind, DEFAULT_MAX_CONTEXT, LoadOptions, Model};
pub use sampler::{Sampler, SamplerConfig};
pub use session::{Session, logits_slice};
pub use step_arena::{ArenaCapacity, ArenaReport, ArenaStats, Slot, StepArena};
pub use weights::{
    DenseFfn, EncoderLayerWeights, EncoderWeights, ExpertFfn, FeedForward, LayerWeights,
    ModelWeights,
};
