//! Parameters of causal attention.

/// Parameters of `attention(q [.., Tq, Hq, D], k [.., Tk, Hkv, D], v [.., Tk, Hkv, Dv])`.
///
/// Query `i` sits at absolute position `q_start + i`; key `j` at position `j`. Query `i`
/// attends to keys `j ≤ q_start + i` (causal) and, with a window `w`, only to keys with
/// `q_start + i - j < w`. Heads are grouped: query head `h` reads KV head `h / (Hq/Hkv)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Multiplies the scores (usually 1/√D).
    pub scale: f32,
    /// Absolute position of the first query.
    pub q_start: usize,
    /// Sliding window in positions, if any.
    pub window: Option<usize>,
    /// Logit soft-cap `c`: scores become `c·tanh(s/c)` (Gemma 2).
    pub softcap: Option<f32>,
}

impl AttentionParams {
    /// Causal attention with the usual 1/√`head_dim` scale, queries starting at `q_start`.
    pub fn causal(head_dim: usize, q_start: usize) -> Self {
        Self {
            scale: 1.0 / (head_dim as f32).sqrt(),
            q_start,
            window: None,
            softcap: None,
        }
    }

    /// Whether query at absolute position `q_pos` sees the key at position `k_pos`.
    #[inline]
    pub fn visible(&self, q_pos: usize, k_pos: usize) -> bool {
        k_pos <= q_pos && self.window.is_none_or(|w| q_pos - k_pos < w)
    }
}
