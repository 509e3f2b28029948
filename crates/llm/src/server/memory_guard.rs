//! The startup check that the slots' KV caches plus the weights and the step arena fit
//! in memory.

use crate::error::{LlmError, Result};

/// Refuses, with the arithmetic, when `slots` KV caches of `per_slot_bytes` each plus
/// `weights_bytes` and `arena_bytes` exceed `available_bytes` (`None`: unknown, nothing
/// is refused).
pub(crate) fn check_slots_fit(
    slots: usize,
    context: usize,
    per_slot_bytes: u64,
    weights_bytes: u64,
    arena_bytes: u64,
    available_bytes: Option<u64>,
) -> Result<()> {
    let needed = (slots as u64)
        .saturating_mul(per_slot_bytes)
        .saturating_add(weights_bytes)
        .saturating_add(arena_bytes);
    match available_bytes {
        Some(available) if needed > available => Err(LlmError::SlotsOutOfMemory {
            slots,
            context,
            per_slot_bytes,
            weights_bytes,
            arena_bytes,
            available_bytes: available,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_with_the_arithmetic() {
        assert!(check_slots_fit(4, 8, 1000, 400, 100, Some(4500)).is_ok());
        assert!(check_slots_fit(4, 8, 1000, 400, 100, None).is_ok());
        let err = check_slots_fit(4, 8, 1000, 400, 101, Some(4500)).expect_err("too big");
        assert_eq!(
            err.to_string(),
            "not enough memory for 4 KV slots: 4 x 1000 B (context 8 positions of 125 B) = 4000 B + weights 400 B + step arena 101 B = 4501 B, but only 4500 B are available (lower --kv-slots or --ctx, or use a smaller --kv-type: f16, q8_0, q4_0)"
        );
    }
}
