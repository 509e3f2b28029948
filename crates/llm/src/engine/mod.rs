//! The LLM engines: weights, the transformer forward (written once over autograd `Var`s),
//! KV cache, sessions, the sampler and token generation.

mod forward;
mod generation;
mod kv_cache;
mod model;
mod sampler;
mod session;
mod weights;

pub use forward::{LogitRows, forward};
pub use generation::{FinishReason, GeneratedPiece, Generation, StopConditions};
pub use kv_cache::KvCache;
pub use model::{BackendKind, DEFAULT_MAX_CONTEXT, LoadOptions, Model};
pub use sampler::{Sampler, SamplerConfig};
pub use session::{Session, logits_slice};
pub use weights::{LayerWeights, ModelWeights};
