//! The demo model tempra trains itself and embeds as `tempra run`'s default: a procedural
//! story corpus ([`StoryGenerator`]), a byte-level BPE tokenizer trained on it
//! ([`crate::tokenizer::train_byte_level_bpe`]), and a small Llama-architecture model
//! trained with the engine's own forward over tempra-autograd ([`train_demo`], run by
//! `cargo xtask train-demo`).

mod corpus;
mod dataset;
mod demo_model;
mod embedded;
mod train;

pub use corpus::{STORY_SEPARATOR, StoryGenerator};
pub use dataset::TokenStream;
pub use demo_model::{DemoShape, demo_metadata, init_params, weights_from_params, write_demo_gguf};
pub use embedded::embedded_demo_model;
pub use train::{
    HELD_OUT_SEED_XOR, Progress, StepStats, TrainConfig, TrainReport, held_out_loss_of_gguf,
    mean_loss, train_demo, train_demo_tokenizer,
};
