//! The largest live set of one transformer block: the yardstick for peak transient
//! memory during decode and prefill (see the README's "Peak-memory bounds").
//!
//! For `t` positions and f32 activations, the forward (`tempra_llm::engine::forward`)
//! holds at its widest point
//! - in the attention half: the residual `x [t, D]` and either the norm output plus the
//!   three projections (`h, q, k, v`) or the projections plus their roped copies
//!   (`q, k, v, q', k'`), whichever is larger;
//! - in the FFN half: `x`, the gate and up projections, the activation and the gated
//!   product (`gate, up, act, gated`, each `[t, F]`), or `x, h, gate, up` while the up
//!   projection is made.
//!
//! Every tensor counts at its pool size class (what the pool really hands out), and the
//! block's live set is the larger of the two halves.

use tempra_llm::model_config::ModelConfig;
use tempra_pool::size_class;

/// The sizes of one block that its live set depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockDims {
    /// Model width `D`.
    pub dim: usize,
    /// Query heads × key length (`Hq·Dk`).
    pub q_width: usize,
    /// Key/value heads × key length (`Hkv·Dk`).
    pub k_width: usize,
    /// Key/value heads × value length (`Hkv·Dv`).
    pub v_width: usize,
    /// Feed-forward width `F`.
    pub ffn: usize,
    /// Key (and query) length per head `Dk`.
    pub key_length: usize,
    /// Value length per head `Dv`.
    pub value_length: usize,
}

impl From<&ModelConfig> for BlockDims {
    fn from(c: &ModelConfig) -> Self {
        Self {
            dim: c.embedding_length,
            q_width: c.head_count * c.key_length,
            k_width: c.head_count_kv * c.key_length,
            v_width: c.head_count_kv * c.value_length,
            ffn: c.feed_forward_length,
            key_length: c.key_length,
            value_length: c.value_length,
        }
    }
}

/// The pool block a `[t, width]` f32 tensor takes.
fn pooled_f32(t: usize, width: usize) -> usize {
    let bytes = t * width * size_of::<f32>();
    size_class(bytes).unwrap_or(bytes)
}

impl BlockDims {
    /// The attention half's widest live set for `t` positions, in pool bytes.
    pub fn attention_live_bytes(&self, t: usize) -> usize {
        let x = pooled_f32(t, self.dim);
        let (q, k, v) = (
            pooled_f32(t, self.q_width),
            pooled_f32(t, self.k_width),
            pooled_f32(t, self.v_width),
        );
        let projecting = x + pooled_f32(t, self.dim) + q + k + v;
        let roping = x + q + k + v + q + k;
        projecting.max(roping)
    }

    /// The FFN half's widest live set for `t` positions, in pool bytes.
    pub fn ffn_live_bytes(&self, t: usize) -> usize {
        let x = pooled_f32(t, self.dim);
        let f = pooled_f32(t, self.ffn);
        let projecting = x + pooled_f32(t, self.dim) + 2 * f;
        let gating = x + 4 * f;
        projecting.max(gating)
    }

    /// The bytes of the block's largest projection matrix as f32 (`D × max(Hq·Dk, Hkv·Dk,
    /// Hkv·Dv, F)`): what one f32 GEMM task may pack of a weight (prefill's extra).
    pub fn largest_projection_f32_bytes(&self) -> usize {
        let widest = self
            .q_width
            .max(self.k_width)
            .max(self.v_width)
            .max(self.ffn);
        self.dim * widest * size_of::<f32>()
    }

    /// The pool block one task of the CPU backend's blocked (prefill) attention leases:
    /// a tile of up to 48 query rows against 64-key blocks — its queries and outputs, the
    /// packed Q, K, V and weight panels, the scores and the row accumulators
    /// (`tempra-backend-cpu`'s `kernels/attention_blocked.rs`, head dims padded to 16).
    pub fn blocked_attention_bytes(&self) -> usize {
        let pad = |n: usize| n.div_ceil(16) * 16;
        let (dk, dv) = (self.key_length, self.value_length);
        let (rows, keys) = (48, 64);
        let floats = rows * (pad(dk) + dv)
            + rows * dk
            + keys * dk
            + keys * pad(dv)
            + 2 * rows * keys
            + rows * pad(dv);
        pooled_f32(1, floats)
    }

    /// The block's largest live set for `t` positions, in pool bytes.
    pub fn live_bytes(&self, t: usize) -> usize {
        self.attention_live_bytes(t).max(self.ffn_live_bytes(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: BlockDims = BlockDims {
        dim: 256,
        q_width: 256,
        k_width: 128,
        v_width: 128,
        ffn: 512,
        key_length: 64,
        value_length: 64,
    };

    #[test]
    fn decode_live_set_of_the_tiny_shape() {
        // One position: x 1 KiB; q 1 KiB, k and v 512 B each; the FFN's tensors 2 KiB.
        assert_eq!(
            TINY.attention_live_bytes(1),
            1024 + 1024 + 512 + 512 + 1024 + 512
        );
        assert_eq!(TINY.ffn_live_bytes(1), 1024 + 4 * 2048);
        assert_eq!(TINY.live_bytes(1), 9216);
    }

    #[test]
    fn sizes_round_to_pool_classes() {
        // stories260K: D 64, F 172: 688 bytes round to the 1 KiB class.
        let dims = BlockDims {
            dim: 64,
            q_width: 64,
            k_width: 32,
            v_width: 32,
            ffn: 172,
            key_length: 8,
            value_length: 8,
        };
        assert_eq!(dims.ffn_live_bytes(1), 256 + 4 * 1024);
    }

    #[test]
    fn attention_dominates_with_a_narrow_ffn() {
        let dims = BlockDims {
            dim: 64,
            q_width: 1024,
            k_width: 1024,
            v_width: 1024,
            ffn: 64,
            key_length: 64,
            value_length: 64,
        };
        assert_eq!(dims.live_bytes(1), dims.attention_live_bytes(1));
        assert!(dims.live_bytes(1) > dims.ffn_live_bytes(1));
    }

    #[test]
    fn largest_projection_is_the_ffn_here() {
        assert_eq!(TINY.largest_projection_f32_bytes(), 256 * 512 * 4);
    }

    #[test]
    fn live_set_grows_with_positions() {
        assert!(TINY.live_bytes(8) > TINY.live_bytes(1));
        assert_eq!(TINY.ffn_live_bytes(8), 8 * 1024 + 4 * 8 * 2048);
    }
}
