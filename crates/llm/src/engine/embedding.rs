//! Sequence embeddings: a sequence's hidden states (after the output norm) pooled into
//! one vector (mean, first token or last token) and optionally L2-normalised.

use std::fmt;

use crate::engine::session::{Session, logits_slice};
use crate::error::{LlmError, Result};

/// How a sequence's per-token hidden states make one embedding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the tokens (sentence-transformers' default).
    Mean,
    /// The first token's (BERT's `[CLS]`).
    Cls,
    /// The last token's (decoder embedding models, e.g. Qwen3-Embedding).
    Last,
}

impl Pooling {
    /// The pooling a GGUF's `{arch}.pooling_type` names (llama.cpp's numbering: 1 mean,
    /// 2 CLS, 3 last; 0 "none" and 4 "rank" have no single vector).
    pub fn from_gguf(value: u64) -> Option<Pooling> {
        match value {
            1 => Some(Pooling::Mean),
            2 => Some(Pooling::Cls),
            3 => Some(Pooling::Last),
            _ => None,
        }
    }

    /// `mean`, `cls` or `last`.
    pub fn parse(name: &str) -> Option<Pooling> {
        match name {
            "mean" => Some(Pooling::Mean),
            "cls" => Some(Pooling::Cls),
            "last" => Some(Pooling::Last),
            _ => None,
        }
    }

    /// The name [`Pooling::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
        }
    }
}

impl fmt::Display for Pooling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Pools `hidden` (`[T, dim]`, row-major) into one `[dim]` vector, summing in f64;
/// with `normalize`, scaled to unit L2 norm (a zero vector stays zero).
pub fn pool(hidden: &[f32], dim: usize, pooling: Pooling, normalize: bool) -> Vec<f32> {
    let rows = hidden.len().checked_div(dim).unwrap_or(0);
    let mut out: Vec<f64> = vec![0.0; dim];
    if rows > 0 {
        match pooling {
            Pooling::Mean => {
                for row in hidden.chunks_exact(dim) {
                    for (o, &h) in out.iter_mut().zip(row) {
                        *o += f64::from(h);
                    }
                }
                out.iter_mut().for_each(|o| *o /= rows as f64);
            }
            Pooling::Cls => out
                .iter_mut()
                .zip(&hidden[..dim])
                .for_each(|(o, &h)| *o = f64::from(h)),
            Pooling::Last => out
                .iter_mut()
                .zip(&hidden[(rows - 1) * dim..])
                .for_each(|(o, &h)| *o = f64::from(h)),
        }
    }
    if normalize {
        let norm = out.iter().map(|o| o * o).sum::<f64>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|o| *o /= norm);
        }
    }
    out.into_iter().map(|o| o as f32).collect()
}

impl Session {
    /// The embedding of `tokens`: the session is reset, the tokens run from position 0
    /// (in chunks of the step arena for a causal model: the same values as one pass),
    /// and their hidden states are pooled. The session then holds `tokens`.
    ///
    /// Errors: no tokens, tokens past the context, token ids outside the vocabulary.
    pub fn embed(&mut self, tokens: &[u32], pooling: Pooling, normalize: bool) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(LlmError::Argument {
                what: "an embedding needs at least one token".into(),
            });
        }
        self.reset();
        let hidden = self.hidden_states(tokens)?;
        let dim = self.model().config().embedding_length;
        Ok(pool(logits_slice(&hidden)?, dim, pooling, normalize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_takes_the_mean_first_or_last_row() {
        let hidden = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(pool(&hidden, 2, Pooling::Mean, false), [3.0, 4.0]);
        assert_eq!(pool(&hidden, 2, Pooling::Cls, false), [1.0, 2.0]);
        assert_eq!(pool(&hidden, 2, Pooling::Last, false), [5.0, 6.0]);
        let unit = pool(&hidden, 2, Pooling::Last, true);
        let norm = unit.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6 && (unit[0] / unit[1] - 5.0 / 6.0).abs() < 1e-6);
        assert_eq!(pool(&[0.0; 4], 2, Pooling::Mean, true), [0.0, 0.0]);
        assert_eq!(Pooling::from_gguf(3), Some(Pooling::Last));
        assert_eq!(Pooling::from_gguf(0), None);
        assert_eq!(Pooling::parse("cls").map(Pooling::name), Some("cls"));
    }
}
