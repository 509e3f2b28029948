//! Parameters of attention: causal (decoders) or over every key (encoders).

use std::ops::Range;

/// Parameters of `attention(q [.., Tq, Hq, D], k [.., Tk, Hkv, D], v [.., Tk, Hkv, Dv])`.
///
/// Query `i` sits at absolute position `q_start + i`; key `j` at position `j`. With
/// `causal`, query `i` attends to keys `j ≤ q_start + i` and, with a window `w`, only to
/// keys with `q_start + i - j < w`; without it (BERT-style encoders) every query attends
/// to every key and the window is ignored. Heads are grouped: query head `h` reads KV
/// head `h / (Hq/Hkv)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Multiplies the scores (usually 1/√D).
    pub scale: f32,
    /// Absolute position of the first query.
    pub q_start: usize,
    /// Sliding window in positions, if any (causal attention only).
    pub window: Option<usize>,
    /// Logit soft-cap `c`: scores become `c·tanh(s/c)` (Gemma 2).
    pub softcap: Option<f32>,
    /// Queries see only keys at or before their position (`false`: every key).
    pub causal: bool,
}

impl AttentionParams {
    /// Causal attention with the usual 1/√`head_dim` scale, queries starting at `q_start`.
    pub fn causal(head_dim: usize, q_start: usize) -> Self {
        Self {
            scale: 1.0 / (head_dim as f32).sqrt(),
            q_start,
            window: None,
            softcap: None,
            causal: true,
        }
    }

    /// Attention of every query to every key (an encoder's), with the usual 1/√`head_dim`
    /// scale.
    pub fn bidirectional(head_dim: usize) -> Self {
        Self {
            causal: false,
            ..Self::causal(head_dim, 0)
        }
    }

    /// Whether query at absolute position `q_pos` sees the key at position `k_pos`.
    #[inline]
    pub fn visible(&self, q_pos: usize, k_pos: usize) -> bool {
        !self.causal || (k_pos <= q_pos && self.window.is_none_or(|w| q_pos - k_pos < w))
    }

    /// The keys (of `tk`) query at absolute position `q_pos` sees, in order.
    #[inline]
    pub fn key_range(&self, q_pos: usize, tk: usize) -> Range<usize> {
        if !self.causal {
            return 0..tk;
        }
        let hi = (q_pos + 1).min(tk);
        let lo = match self.window {
            Some(w) => (q_pos + 1).saturating_sub(w),
            None => 0,
        };
        lo..hi.max(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::AttentionParams;

    #[test]
    fn key_ranges_follow_visibility() {
        let mut p = AttentionParams::causal(4, 2);
        p.window = Some(3);
        for q_pos in 0..8 {
            let range = p.key_range(q_pos, 6);
            for k in 0..6 {
                assert_eq!(range.contains(&k), p.visible(q_pos, k), "{q_pos} {k}");
            }
        }
        let b = AttentionParams::bidirectional(4);
        assert_eq!(b.key_range(0, 5), 0..5);
        assert!(b.visible(0, 4));
    }
}
