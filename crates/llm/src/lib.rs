//! tempra-llm: GGUF model files, llama2.c checkpoints, tokenizers and (as they land) LLM
//! engines. The `tempra` command sits behind the default `cli` feature.

#[cfg(feature = "chat")]
pub mod chat;
pub mod demo;
pub mod engine;
pub mod error;
pub mod gguf;
pub mod grammar;
#[cfg(feature = "json")]
pub mod json;
pub mod llama2c;
pub mod model_config;
pub mod model_file;
pub mod quantize;
#[cfg(feature = "server")]
pub mod server;
pub mod tensor_names;
pub mod testing;
pub mod tokenizer;

pub use error::LlmError;
pub use model_file::{ModelFile, ModelFormat};
