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
}

impl RopeConfig {
    /// Plain rope over `rotary_dims` with base `theta`.
    pub fn new(rotary_dims: usize, theta: f64, style: RopeStyle) -> Self {
        Self {
            rotary_dims,
            theta,
            style,
            scaling: RopeScaling::None,
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
        };
        scaled / freq_factor
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
