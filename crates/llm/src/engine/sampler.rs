//! `Sampler`: picks the next token from logits (greedy, temperature, top-k, top-p, min-p,
//! repetition penalty), reproducibly from a seed.

use tempra_tensor::random::SplitMix64;

use crate::error::{LlmError, Result};
use crate::grammar::{GrammarConstraint, TokenMask};

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
    /// Added to these tokens' logits before sampling (OpenAI's `logit_bias`; -100
    /// bans a token in practice, 100 all but forces it): `(token id, bias)` sorted by
    /// id, one entry per id.
    pub logit_bias: Vec<(u32, f32)>,
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
            logit_bias: Vec::new(),
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

/// Picks tokens from logits. Holds its candidate buffer (and the token mask of
/// constrained sampling) so sampling allocates nothing after the first call.
#[derive(Debug)]
pub struct Sampler {
    config: SamplerConfig,
    rng: SplitMix64,
    candidates: Vec<(u32, f32)>,
    mask: TokenMask,
}

impl Sampler {
    /// A sampler with `config`.
    pub fn new(config: SamplerConfig) -> Self {
        let rng = SplitMix64::new(config.seed);
        Self {
            config,
            rng,
            candidates: Vec::new(),
            mask: TokenMask::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The next token given `logits` over the vocabulary and the tokens seen so far
    /// (for the penalties). NaN logits are never chosen.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (i as u32, if l.is_nan() { f32::NEG_INFINITY } else { l })),
        );
        apply_penalties(&mut self.candidates, history, &self.config);
        apply_logit_bias(&mut self.candidates, &self.config.logit_bias);
        self.pick()
    }

    /// The next token allowed by `constraint` with `remaining` tokens left (this one
    /// included; `None`: no bound), and the constraint moved past it; `None` when the
    /// output is complete and the vocabulary has no end-of-generation token to end it
    /// with.
    ///
    /// The token drawn from all the logits is checked first; only when the constraint
    /// rejects it are the logits masked to the allowed tokens and the draw repeated
    /// (as llama.cpp does). Greedy sampling gives the most likely allowed token either
    /// way; with a temperature, the second draw comes from the allowed tokens' own
    /// top-k/top-p/min-p distribution. The same logits, history and seed give the same
    /// token.
    ///
    /// Errors: [`LlmError::Constraint`] when the grammar is too ambiguous, or no token
    /// can continue the output (the budget rule makes that impossible for a
    /// constraint whose [`GrammarConstraint::min_tokens`] fitted at the start).
    pub fn sample_constrained(
        &mut self,
        logits: &[f32],
        history: &[u32],
        constraint: &mut GrammarConstraint,
        remaining: Option<usize>,
    ) -> Result<Option<u32>> {
        let first = self.sample(logits, history);
        if constraint.allows(first, remaining)? {
            constraint.accept(first)?;
            return Ok(Some(first));
        }
        constraint.fill_mask(remaining, &mut self.mask)?;
        if self.mask.is_empty() {
            if constraint.is_complete() {
                return Ok(None);
            }
            return Err(LlmError::Constraint {
                what: "no token can continue the output within the tokens left".into(),
            });
        }
        self.candidates.clear();
        self.candidates.extend(self.mask.iter().map(|id| {
            let l = logits
                .get(id as usize)
                .copied()
                .unwrap_or(f32::NEG_INFINITY);
            (id, if l.is_nan() { f32::NEG_INFINITY } else { l })
        }));
        apply_penalties(&mut self.candidates, history, &self.config);
        apply_logit_bias(&mut self.candidates, &self.config.logit_bias);
        // Allowed tokens with no chance (-inf logits) are never drawn while another has
        // one; if none has, the first allowed token is taken.
        if self.candidates.iter().all(|c| c.1 == f32::NEG_INFINITY) {
            self.candidates.truncate(1);
        } else {
            self.candidates.retain(|c| c.1 != f32::NEG_INFINITY);
        }
        let id = self.pick();
        constraint.accept(id)?;
        Ok(Some(id))
    }

    /// Draws from `candidates` (penalties applied) with the configured temperature,
    /// top-k, min-p and top-p.
    fn pick(&mut self) -> u32 {
        let c = &self.config;
        if c.temperature <= 0.0 {
            return argmax(&self.candidates);
        }
        let cands = &mut self.candidates;
        if c.top_k > 0 && c.top_k < cands.len() {
            // The k most likely first (a linear-time selection), then only they sorted.
            cands.select_nth_unstable_by(c.top_k - 1, |a, b| b.1.total_cmp(&a.1));
            cands.truncate(c.top_k);
        }
        cands.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
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

/// The first candidate with the largest logit (the first candidate when all are -inf).
fn argmax(cands: &[(u32, f32)]) -> u32 {
    let Some(&first) = cands.first() else {
        return 0;
    };
    let mut best = first;
    for &cand in cands {
        if cand.1 > best.1 {
            best = cand;
        }
    }
    best.0
}

/// Adds each `(id, bias)` of `bias` to that candidate's logit (candidates sorted by id:
/// every id, or a constraint's allowed ones).
fn apply_logit_bias(cands: &mut [(u32, f32)], bias: &[(u32, f32)]) {
    if bias.is_empty() {
        return;
    }
    let dense = cands
        .last()
        .is_some_and(|l| l.0 as usize + 1 == cands.len());
    for &(id, b) in bias {
        let at = if dense {
            Some(id as usize).filter(|&at| at < cands.len())
        } else {
            cands.binary_search_by_key(&id, |c| c.0).ok()
        };
        if let Some(cand) = at.map(|at| &mut cands[at]) {
            cand.1 += b;
        }
    }
}

fn apply_penalties(cands: &mut [(u32, f32)], history: &[u32], c: &SamplerConfig) {
    let rep = c.repetition_penalty != 1.0;
    let freq = c.frequency_penalty != 0.0 || c.presence_penalty != 0.0;
    if !rep && !freq {
        return;
    }
    let recent = &history[history.len().saturating_sub(c.repetition_window)..];
    // Candidates are sorted by id: every id, or a constraint's allowed ones.
    let dense = cands
        .last()
        .is_some_and(|l| l.0 as usize + 1 == cands.len());
    for (i, &id) in recent.iter().enumerate() {
        let at = if dense {
            Some(id as usize).filter(|&at| at < cands.len())
        } else {
            cands.binary_search_by_key(&id, |c| c.0).ok()
        };
        let Some(cand) = at.map(|at| &mut cands[at]) else {
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
    fn logit_bias_shifts_and_bans() {
        let logits = [2.0, 1.0, 0.5];
        let greedy = |logit_bias| {
            Sampler::new(SamplerConfig {
                logit_bias,
                ..SamplerConfig::greedy()
            })
        };
        assert_eq!(greedy(vec![]).sample(&logits, &[]), 0);
        assert_eq!(greedy(vec![(0, -100.0)]).sample(&logits, &[]), 1);
        assert_eq!(greedy(vec![(2, 1.6)]).sample(&logits, &[]), 2);
        // Ids past the vocabulary change nothing (the server refuses them earlier).
        assert_eq!(greedy(vec![(7, 50.0)]).sample(&logits, &[]), 0);
        // With a temperature, a banned token is never drawn.
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 5,
            logit_bias: vec![(0, -100.0)],
            ..SamplerConfig::default()
        });
        assert!((0..200).all(|_| s.sample(&logits, &[]) != 0));
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

    #[test]
    fn constrained_sampling_takes_the_best_allowed_token() {
        use crate::grammar::test_vocab::byte_vocab;
        use crate::grammar::{Grammar, TokenTrie};
        use std::sync::Arc;

        let vocab = byte_vocab(&["ab", "ba", "zz"]);
        let trie = Arc::new(TokenTrie::new(&vocab, &[]));
        let grammar = Grammar::parse("root ::= [ab]+ \"!\"\n").expect("grammar");
        let ab = vocab.token_id(b"ab").expect("ab");
        let zz = vocab.token_id(b"zz").expect("zz");
        let mut logits = vec![0.0f32; vocab.len()];
        logits[zz as usize] = 9.0; // the best token overall, not allowed
        logits[ab as usize] = 5.0; // the best allowed one
        let mut constraint = GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("c");
        let mut greedy = Sampler::new(SamplerConfig::greedy());
        let got = greedy
            .sample_constrained(&logits, &[], &mut constraint, Some(10))
            .expect("sample");
        assert_eq!(got, Some(ab));
        // With a temperature: the same seed gives the same tokens, all allowed.
        let run = |seed| {
            let mut c = GrammarConstraint::new(&grammar, Arc::clone(&trie)).expect("c");
            let mut s = Sampler::new(SamplerConfig {
                temperature: 1.0,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
                seed,
                ..SamplerConfig::default()
            });
            let mut out = Vec::new();
            for left in (1..=8).rev() {
                match s
                    .sample_constrained(&logits, &out, &mut c, Some(left))
                    .expect("sample")
                {
                    Some(id) if vocab.is_eog(id) => break,
                    Some(id) => out.push(id),
                    None => break,
                }
            }
            out
        };
        let a = run(3);
        assert_eq!(a, run(3));
        let text = vocab.detokenize(&a, Default::default()).expect("text");
        assert!(
            text.ends_with('!') && text[..text.len() - 1].chars().all(|c| c == 'a' || c == 'b'),
            "{text:?}"
        );
    }
}
