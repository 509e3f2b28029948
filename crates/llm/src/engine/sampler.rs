//! `Sampler`: picks the next token from logits (greedy, temperature, top-k, top-p, min-p,
//! repetition penalty), reproducibly from a seed.

use tempra_tensor::random::SplitMix64;

/// Sampling settings. Defaults follow llama.cpp: temperature 0.8, top-k 40, top-p 0.95,
/// min-p 0.05, no repetition penalty.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Temperature; ≤ 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p` (1: all).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one (0: none).
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recently seen tokens by this (1: off).
    pub repetition_penalty: f32,
    /// How many recent tokens the repetition penalty looks at.
    pub repetition_window: usize,
    /// Subtract `frequency_penalty · count` from a seen token's logit (OpenAI style).
    pub frequency_penalty: f32,
    /// Subtract `presence_penalty` from every seen token's logit (OpenAI style).
    pub presence_penalty: f32,
    /// The random seed.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            repetition_window: 64,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::default()
        }
    }
}

/// Picks tokens from logits. Holds its candidate buffer so sampling allocates nothing
/// after the first call.
#[derive(Debug)]
pub struct Sampler {
    config: SamplerConfig,
    rng: SplitMix64,
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler with `config`.
    pub fn new(config: SamplerConfig) -> Self {
        let rng = SplitMix64::new(config.seed);
        Self {
            config,
            rng,
            candidates: Vec::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The next token given `logits` over the vocabulary and the tokens seen so far
    /// (for the penalties). NaN logits are never chosen.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let c = &self.config;
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (i as u32, if l.is_nan() { f32::NEG_INFINITY } else { l })),
        );
        apply_penalties(&mut self.candidates, history, c);
        if c.temperature <= 0.0 {
            return argmax(&self.candidates);
        }
        let cands = &mut self.candidates;
        cands.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        if c.top_k > 0 && c.top_k < cands.len() {
            cands.truncate(c.top_k);
        }
        // Softmax at the temperature.
        let max = cands[0].1;
        let mut sum = 0.0f32;
        for cand in cands.iter_mut() {
            cand.1 = ((cand.1 - max) / c.temperature).exp();
            sum += cand.1;
        }
        for cand in cands.iter_mut() {
            cand.1 /= sum;
        }
        if c.min_p > 0.0 {
            let floor = c.min_p * cands[0].1;
            let keep = cands
                .iter()
                .take_while(|cand| cand.1 >= floor)
                .count()
                .max(1);
            cands.truncate(keep);
        }
        if c.top_p < 1.0 {
            let mut acc = 0.0;
            let mut keep = cands.len();
            for (i, cand) in cands.iter().enumerate() {
                acc += cand.1;
                if acc >= c.top_p {
                    keep = i + 1;
                    break;
                }
            }
            cands.truncate(keep);
        }
        let total: f32 = cands.iter().map(|cand| cand.1).sum();
        let mut r = self.rng.next_f64() as f32 * total;
        for cand in cands.iter() {
            r -= cand.1;
            if r <= 0.0 {
                return cand.0;
            }
        }
        cands[cands.len() - 1].0
    }
}

/// The first index of the largest logit.
fn argmax(cands: &[(u32, f32)]) -> u32 {
    let mut best = (0u32, f32::NEG_INFINITY);
    for &cand in cands {
        if cand.1 > best.1 {
            best = cand;
        }
    }
    best.0
}

fn apply_penalties(cands: &mut [(u32, f32)], history: &[u32], c: &SamplerConfig) {
    let rep = c.repetition_penalty != 1.0;
    let freq = c.frequency_penalty != 0.0 || c.presence_penalty != 0.0;
    if !rep && !freq {
        return;
    }
    let recent = &history[history.len().saturating_sub(c.repetition_window)..];
    for (i, &id) in recent.iter().enumerate() {
        let Some(cand) = cands.get_mut(id as usize) else {
            continue;
        };
        // Penalise each distinct token once for the repetition penalty.
        let first = !recent[..i].contains(&id);
        if rep && first {
            cand.1 = if cand.1 > 0.0 {
                cand.1 / c.repetition_penalty
            } else {
                cand.1 * c.repetition_penalty
            };
        }
        if freq {
            cand.1 -= c.frequency_penalty + if first { c.presence_penalty } else { 0.0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_first_maximum() {
        let mut s = Sampler::new(SamplerConfig::greedy());
        assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0], &[]), 1);
        assert_eq!(s.sample(&[f32::NAN, 0.5, 0.2], &[]), 1);
    }

    #[test]
    fn same_seed_same_choices() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 7919) % 13) as f32 * 0.3).collect();
        let config = SamplerConfig {
            seed: 9,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            temperature: 1.5,
            ..SamplerConfig::default()
        };
        let (mut a, mut b) = (Sampler::new(config.clone()), Sampler::new(config));
        let xs: Vec<u32> = (0..100).map(|_| a.sample(&logits, &[])).collect();
        let ys: Vec<u32> = (0..100).map(|_| b.sample(&logits, &[])).collect();
        assert_eq!(xs, ys);
        assert!(
            xs.iter().any(|&x| x != xs[0]),
            "temperature 1.5 should vary"
        );
    }

    #[test]
    fn top_k_one_is_greedy_and_min_p_filters() {
        let logits = [1.0, 5.0, 2.0, 4.9];
        let mut s = Sampler::new(SamplerConfig {
            top_k: 1,
            seed: 3,
            ..SamplerConfig::default()
        });
        assert!((0..50).all(|_| s.sample(&logits, &[]) == 1));
        // min_p 0.99 keeps only tokens within 1% of the best.
        let mut s = Sampler::new(SamplerConfig {
            top_k: 0,
            top_p: 1.0,
            min_p: 0.99,
            seed: 4,
            ..SamplerConfig::default()
        });
        assert!((0..50).all(|_| s.sample(&logits, &[]) == 1));
    }

    #[test]
    fn frequency_and_presence_penalties_count_as_openai_does() {
        let logits = [2.0, 1.5, 1.0];
        let greedy = |frequency_penalty, presence_penalty| {
            Sampler::new(SamplerConfig {
                temperature: 0.0,
                frequency_penalty,
                presence_penalty,
                ..SamplerConfig::default()
            })
        };
        // Frequency: 0.2 per occurrence (2 → 1.6 keeps token 0, 3 → 1.4 loses it).
        assert_eq!(greedy(0.2, 0.0).sample(&logits, &[0, 0]), 0);
        assert_eq!(greedy(0.2, 0.0).sample(&logits, &[0, 2, 0, 0]), 1);
        // Presence: once per distinct token, however often it appeared.
        assert_eq!(greedy(0.0, 0.4).sample(&logits, &[0, 0, 0, 0]), 0);
        assert_eq!(greedy(0.0, 0.6).sample(&logits, &[0]), 1);
        // Negative values favour seen tokens.
        assert_eq!(greedy(0.0, -1.2).sample(&logits, &[2]), 2);
    }

    #[test]
    fn repetition_penalty_steers_away() {
        let logits = [2.0, 1.9];
        let mut s = Sampler::new(SamplerConfig {
            temperature: 0.0,
            repetition_penalty: 1.5,
            ..SamplerConfig::default()
        });
        assert_eq!(s.sample(&logits, &[0]), 1);
        assert_eq!(s.sample(&logits, &[]), 0);
    }
}
