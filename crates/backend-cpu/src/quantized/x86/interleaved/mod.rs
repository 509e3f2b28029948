//! The eight-row products over the prepared (row-interleaved) weights of
//! [`crate::interleaved`]: one group of eight weight rows against one to four activation
//! rows (eight for the 512-bit IQ4 products), reading the group as one sequential
//! stream. One row is the decode GEMV; more rows (prefill) reuse each unpacked record for
//! every row.

pub(super) mod iq4;
mod iq4_wide;
pub(super) mod legacy;
pub(super) mod q4_k;
pub(super) mod q6_k;
pub(super) mod q8_0_sums;
pub(super) mod ternary;
