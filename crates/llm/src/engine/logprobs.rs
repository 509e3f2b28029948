//! Token log-probabilities: the log-softmax of a position's raw logits (before penalties,
//! bias, grammar and temperature, as OpenAI's `logprobs` report them), for the chosen
//! token and the most likely alternatives.

/// The most alternatives a [`TokenLogprob`] carries (OpenAI's bound on `top_logprobs`).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The log-probability reported for a token the model gives no chance (a `-inf` or NaN
/// logit): OpenAI's value, since JSON has no infinity.
pub const LOGPROB_FLOOR: f32 = -9999.0;

/// One position's log-probabilities: the token that was chosen and the `top` most likely
/// ones (most likely first; equal values in id order).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The chosen token.
    pub id: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The most likely tokens and their log-probabilities.
    pub top: Vec<(u32, f32)>,
}

/// The log-softmax normaliser of `logits`: `max + ln Σ exp(l - max)` over the finite
/// logits, summed in f64 (`None` when no logit is finite).
pub fn log_sum_exp(logits: &[f32]) -> Option<f64> {
    let max = logits
        .iter()
        .copied()
        .filter(|l| l.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return None;
    }
    let max = f64::from(max);
    let sum: f64 = logits
        .iter()
        .filter(|l| l.is_finite())
        .map(|&l| (f64::from(l) - max).exp())
        .sum();
    Some(max + sum.ln())
}

/// The log-probabilities at a position with `logits` over the vocabulary: of `chosen`
/// and of the `top` (at most [`MAX_TOP_LOGPROBS`]) most likely tokens. Non-finite
/// results are reported as [`LOGPROB_FLOOR`]. Allocates only the `top` list.
pub fn token_logprobs(logits: &[f32], chosen: u32, top: usize) -> TokenLogprob {
    let top = top.min(MAX_TOP_LOGPROBS).min(logits.len());
    let lse = log_sum_exp(logits);
    let logprob = |l: f32| -> f32 {
        match lse {
            Some(lse) if l.is_finite() => ((f64::from(l) - lse) as f32).max(LOGPROB_FLOOR),
            _ => LOGPROB_FLOOR,
        }
    };
    // The `top` largest logits in one pass: a small list kept sorted (larger first,
    // then lower id), entered only by a logit above its last.
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &l) in logits.iter().enumerate() {
            let l = if l.is_nan() { f32::NEG_INFINITY } else { l };
            if best.len() == top && best.last().is_some_and(|&(_, last)| l <= last) {
                continue;
            }
            let at = best.partition_point(|&(_, b)| b >= l);
            best.insert(at, (i as u32, l));
            best.truncate(top);
        }
    }
    TokenLogprob {
        id: chosen,
        logprob: logits
            .get(chosen as usize)
            .map_or(LOGPROB_FLOOR, |&l| logprob(l)),
        top: best.into_iter().map(|(id, l)| (id, logprob(l))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_the_log_softmax() {
        let logits = [1.0f32, 3.0, -2.0, 3.0, 0.5];
        let lse = logits.iter().map(|&l| f64::from(l).exp()).sum::<f64>().ln();
        let got = token_logprobs(&logits, 4, 3);
        assert!((f64::from(got.logprob) - (0.5 - lse)).abs() < 1e-6);
        let ids: Vec<u32> = got.top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 3, 0], "ties in id order");
        for &(id, lp) in &got.top {
            assert!((f64::from(lp) - (f64::from(logits[id as usize]) - lse)).abs() < 1e-6);
        }
        let total: f64 = logits.iter().map(|&l| (f64::from(l) - lse).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn no_chance_is_the_floor_and_top_is_bounded() {
        let logits = [f32::NEG_INFINITY, 0.0, f32::NAN, 0.0];
        let got = token_logprobs(&logits, 0, 50);
        assert_eq!(got.logprob, LOGPROB_FLOOR);
        assert_eq!(got.top.len(), 4);
        assert_eq!(
            &got.top[..2],
            &[(1, -std::f32::consts::LN_2), (3, -std::f32::consts::LN_2)]
        );
        assert_eq!(got.top[2].1, LOGPROB_FLOOR);
        assert!(
            token_logprobs(&[f32::NAN; 3], 1, 2)
                .top
                .iter()
                .all(|t| t.1 == LOGPROB_FLOOR)
        );
        let wide: Vec<f32> = (0..100).map(|i| i as f32 * 0.01).collect();
        let got = token_logprobs(&wide, 99, 64);
        assert_eq!(got.top.len(), MAX_TOP_LOGPROBS);
        assert_eq!(got.top[0].0, 99);
        assert_eq!(got.top[19].0, 80);
    }
}
