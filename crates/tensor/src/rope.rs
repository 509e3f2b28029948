//! Rotary position embedding parameters and the frequency computation every backend shares.

use std::f64::consts::PI;

/// How the rotated dims are paired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// Pairs (0,1), (2,3), ...: the original Llama / GGUF `llama` layout.
    Interleaved,
    /// Pairs (i, i + n/2): GPT-NeoX, Qwen, Gemma (`rope_type = neox`).
    Neox,
}

/// Frequency scaling for long contexts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// No scaling.
    None,
    /// Positions divided by `factor` (linear interpolation).
    Linear {
        /// The scale factor.
        factor: f64,
    },
    /// Llama 3.1's wavelength-dependent scaling.
    Llama3 {
        /// The scale factor for low frequencies.
        factor: f64,
        /// `low_freq_factor`.
        low_freq_factor: f64,
        /// `high_freq_factor`.
        high_freq_factor: f64,
        /// The context length the model was pre-trained with.
        original_max_position: f64,
    },
    /// YaRN ("NTK-by-parts"): pairs that turn fewer than `beta_slow` times over the
    /// original context are interpolated (frequency ÷ `factor`), pairs that turn more
    /// than `beta_fast` times keep their frequency, and a linear ramp over the pair index
    /// mixes the two in between (the ramp's ends rounded outwards to whole pairs, as
    /// transformers and llama.cpp do). Its attention factor (`0.1·ln(factor) + 1` by
    /// default) is [`RopeConfig::attention_factor`].
    Yarn {
        /// The context extension factor.
        factor: f64,
        /// The context length the model was pre-trained with.
        original_max_position: f64,
        /// Rotations over the original context above which a pair keeps its frequency
        /// (32 by default).
        beta_fast: f64,
        /// Rotations below which a pair is fully interpolated (1 by default).
        beta_slow: f64,
        /// How much of the ramp applies (1: all of it, llama.cpp's `yarn_ext_factor`; 0
        /// makes YaRN plain linear interpolation).
        ext_factor: f64,
    },
}

/// Parameters of a rope op over `x [.., T, H, D]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeConfig {
    /// Dims rotated per head (`n_rot`, ≤ D and even); the rest pass through.
    pub rotary_dims: usize,
    /// The base θ (10000 for Llama 2).
    pub theta: f64,
    /// Pairing.
    pub style: RopeStyle,
    /// Frequency scaling.
    pub scaling: RopeScaling,
    /// Multiplies the rotated dims (the pass-through ones are copied): YaRN's `mscale`
    /// and LongRoPE's attention factor, which scale the attention logits by its square
    /// through both q and k. 1 for plain rope. The inverse rotation multiplies too (it
    /// is the transpose, rope's gradient).
    pub attention_factor: f64,
}

impl RopeConfig {
    /// Plain rope over `rotary_dims` with base `theta`.
    pub fn new(rotary_dims: usize, theta: f64, style: RopeStyle) -> Self {
        Self {
            rotary_dims,
            theta,
            style,
            scaling: RopeScaling::None,
            attention_factor: 1.0,
        }
    }

    /// The inverse frequency of pair `i` (0 ≤ i < rotary_dims/2), with scaling applied;
    /// `freq_factor` divides it (GGUF `rope_freqs`, 1.0 when absent).
    pub fn inv_freq(&self, i: usize, freq_factor: f64) -> f64 {
        let base = self.theta.powf(-(2.0 * i as f64) / self.rotary_dims as f64);
        let scaled = match self.scaling {
            RopeScaling::None => base,
            RopeScaling::Linear { factor } => base / factor,
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position,
            } => {
                let low_wavelen = original_max_position / low_freq_factor;
                let high_wavelen = original_max_position / high_freq_factor;
                let wavelen = 2.0 * PI / base;
                if wavelen < high_wavelen {
                    base
                } else if wavelen > low_wavelen {
                    base / factor
                } else {
                    let smooth = (original_max_position / wavelen - low_freq_factor)
                        / (high_freq_factor - low_freq_factor);
                    (1.0 - smooth) * base / factor + smooth * base
                }
            }
            RopeScaling::Yarn {
                factor,
                original_max_position,
                beta_fast,
                beta_slow,
                ext_factor,
            } => {
                let (low, high) = self.yarn_ramp(original_max_position, beta_fast, beta_slow);
                let ramp = 1.0 - ((i as f64 - low) / (high - low).max(0.001)).clamp(0.0, 1.0);
                let mix = ramp * ext_factor;
                base / factor * (1.0 - mix) + base * mix
            }
        };
        scaled / freq_factor
    }

    /// YaRN's ramp over the pair index: the pair that turns `beta_fast` times over
    /// `original_max_position` positions (rounded down, at least 0) and the one that
    /// turns `beta_slow` times (rounded up, at most `rotary_dims − 1`).
    fn yarn_ramp(&self, original_max_position: f64, beta_fast: f64, beta_slow: f64) -> (f64, f64) {
        let dims = self.rotary_dims as f64;
        let pair_turning = |rotations: f64| {
            dims * (original_max_position / (rotations * 2.0 * PI)).ln() / (2.0 * self.theta.ln())
        };
        let low = pair_turning(beta_fast).floor().max(0.0);
        let high = pair_turning(beta_slow).ceil().min(dims - 1.0);
        (low, high)
    }

    /// The element indices (within a head) of pair `i`.
    #[inline]
    pub fn pair(&self, i: usize) -> (usize, usize) {
        match self.style {
            RopeStyle::Interleaved => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + self.rotary_dims / 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen3's long-context YaRN (θ 1e6, 128 dims, ×4 from 32768) against transformers'
    /// `_compute_yarn_parameters` (5.25, f32): every eighth pair, across the ramp
    /// (pairs 23..40 mix).
    #[test]
    fn yarn_matches_transformers() {
        let config = RopeConfig {
            scaling: RopeScaling::Yarn {
                factor: 4.0,
                original_max_position: 32768.0,
                beta_fast: 32.0,
                beta_slow: 1.0,
                ext_factor: 1.0,
            },
            ..RopeConfig::new(128, 1e6, RopeStyle::Neox)
        };
        let transformers = [
            1.0,
            0.177_827_939_391_136_17,
            0.031_622_778_624_296_19,
            0.005_375_321_488_827_467,
            0.000_602_941_145_189_106_5,
            4.445_698_505_151_085_6e-5,
            7.905_693_564_680_405e-6,
            1.405_853_367_941_745e-6,
        ];
        for (k, want) in transformers.into_iter().enumerate() {
            let got = config.inv_freq(8 * k, 1.0);
            assert!(
                (got - want).abs() <= 1e-6 * want,
                "pair {}: {got} vs {want}",
                8 * k
            );
        }
        // Outside the ramp: unchanged below it, ÷ factor above it.
        let plain = RopeConfig::new(128, 1e6, RopeStyle::Neox);
        assert_eq!(config.inv_freq(3, 1.0), plain.inv_freq(3, 1.0));
        assert_eq!(config.inv_freq(50, 1.0), plain.inv_freq(50, 1.0) / 4.0);
    }
}
