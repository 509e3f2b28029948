//! The sampling options `tempra run` and `tempra chat` share (llama.cpp's defaults).

use tempra_llm::engine::SamplerConfig;

/// Sampling flags.
#[derive(Debug, clap::Args)]
pub(crate) struct SamplingArgs {
    /// Temperature (0: greedy).
    #[arg(long = "temp", default_value_t = 0.8)]
    temperature: f32,
    /// Keep the K most likely tokens (0: all).
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Nucleus sampling threshold (1: off).
    #[arg(long = "top-p", default_value_t = 0.95)]
    top_p: f32,
    /// Drop tokens below this fraction of the best one's probability (0: off).
    #[arg(long = "min-p", default_value_t = 0.05)]
    min_p: f32,
    /// Repetition penalty (1: off).
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Random seed (default: a random one; `tempra bench` uses a fixed one).
    #[arg(long)]
    seed: Option<u64>,
}

impl SamplingArgs {
    /// `--seed`, or `default`.
    pub(crate) fn seed_or(&self, default: u64) -> u64 {
        self.seed.unwrap_or(default)
    }

    /// `--seed`, or one from the clock.
    pub(crate) fn seed(&self) -> u64 {
        self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        })
    }

    /// The sampler settings with `seed`.
    pub(crate) fn config(&self, seed: u64) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repeat_penalty,
            seed,
            ..SamplerConfig::default()
        }
    }
}
