//! Row-major dot products of the I-quant and ternary formats, after ggml's AVX2 kernels:
//! each format's weights are unpacked into bytes once per block, for up to four
//! activation rows, and multiplied in integers (`maddubs` pairs of u8 × i8, the signs
//! moved onto the activations with `sign`), scaled by the sub-block scales in i16 × i16
//! products ([`IntDots::dpwssd`]) and by `d_w · d_a` once per block in f32.
//!
//! IQ4_NL is a 32-value format with signed levels against Q8_0: its unpacker is a
//! `LegacyFormat` and it runs the legacy formats' kernel (`row_major/legacy.rs`). The
//! others (IQ4_XS, IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_S, IQ1_M, TQ1_0, TQ2_0,
//! against Q8_K) are each one generic body ([`BlockKernel`]) inside [`Blocks`], their one
//! [`RowDot`]. A row's sum runs the same instructions in the same order at every row
//! count, so a row gives the same bits alone (decode) as in a tile of four (prefill).
//!
//! - `iq4.rs`: IQ4_NL and IQ4_XS (the 4-bit indices through the codebook by `pshufb`);
//! - `grid.rs`: the kernel over 32-value sub-blocks ([`grid::SubBlockKernel`]) and the
//!   IQ2/IQ3 unpackers (grid entries gathered from `tempra_tensor`'s tables);
//! - `iq1.rs`: IQ1_S and IQ1_M's unpackers; `ternary.rs`: TQ1_0 and TQ2_0.

mod grid;
mod iq1;
mod iq4;
#[cfg(test)]
mod probe;
mod ternary;

use std::arch::x86_64::*;

use super::vectors::{hsum, prefetch_row, rows};
use super::{IntDots, Q8K_BYTES, RowDot};

pub(super) use grid::SubBlockKernel;
pub(super) use grid::{Iq2S, Iq2Xs, Iq2Xxs, Iq3S, Iq3Xxs};
pub(super) use iq1::{Iq1M, Iq1S};
pub(super) use iq4::{Iq4Nl, Iq4Xs, Mxfp4};
pub(super) use ternary::{Tq1_0, Tq2_0};

/// How far ahead of the current block the weight row is prefetched.
const PREFETCH_BYTES: usize = 4096;

/// One Q8_K-partnered weight format's product over whole blocks.
pub(in crate::quantized::x86) trait BlockKernel {
    /// Bytes per weight block.
    const BLOCK_BYTES: usize;

    /// Adds the dot product of the weight block at `wp` with the activation block at
    /// each `a[r]` into `acc[r]` (eight f32 lanes, summed when the row ends).
    ///
    /// # Safety
    ///
    /// `wp` points to `BLOCK_BYTES` readable bytes, each `a[r]` to a Q8_K block; the
    /// caller is compiled for `isa`'s features.
    unsafe fn block<I: IntDots, const R: usize>(
        isa: I,
        wp: *const u8,
        a: &[*const u8; R],
        acc: &mut [__m256; R],
    );
}

/// The row-major dot product of the block format `K`.
pub(in crate::quantized::x86) struct Blocks<K>(K);

impl<K: BlockKernel> RowDot for Blocks<K> {
    #[inline(always)]
    unsafe fn dot<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    ) {
        let s = isa.avx2();
        // SAFETY: the caller guarantees `R` activation rows.
        let mut a: [*const u8; R] = unsafe { rows::<R>(acts) };
        // Blocks alternate between two accumulator sets, so consecutive blocks' FMAs do
        // not wait on each other (the same alternation at every row count); pairs of
        // blocks keep both sets in registers.
        // SAFETY: the token proves AVX.
        let zero = unsafe { _mm256_setzero_ps() };
        let (mut even, mut odd) = ([zero; R], [zero; R]);
        let mut b = 0;
        while b + 1 < nb {
            // SAFETY: blocks `b` and `b + 1 < nb` of the weight and activation rows.
            unsafe {
                one_block::<K, I, R>(isa, w, b, &mut a, &mut even);
                one_block::<K, I, R>(isa, w, b + 1, &mut a, &mut odd);
            }
            b += 2;
        }
        if b < nb {
            // SAFETY: block `b < nb` of the weight and activation rows.
            unsafe { one_block::<K, I, R>(isa, w, b, &mut a, &mut even) };
        }
        for r in 0..R {
            // SAFETY: the token proves AVX.
            out[r] = hsum(s, unsafe { _mm256_add_ps(even[r], odd[r]) });
        }
    }
}

/// Block `b` of the weight row at `w` against the activation blocks at `a` (which then
/// step to the next block), added into `acc`.
///
/// # Safety
///
/// Block `b` of the weight row and a block at each `a[r]` are readable; the caller is
/// compiled for `isa`'s features.
#[inline(always)]
unsafe fn one_block<K: BlockKernel, I: IntDots, const R: usize>(
    isa: I,
    w: *const u8,
    b: usize,
    a: &mut [*const u8; R],
    acc: &mut [__m256; R],
) {
    // SAFETY: block `b` of the weight row (the caller's contract).
    let wp = unsafe { w.add(b * K::BLOCK_BYTES) };
    prefetch_row(isa.avx2(), wp, PREFETCH_BYTES, K::BLOCK_BYTES.div_ceil(64));
    // SAFETY: a whole weight block at `wp`, an activation block at each `a[r]`.
    unsafe { K::block(isa, wp, a, acc) };
    for p in a.iter_mut() {
        // SAFETY: within (or one past) each activation row of `nb` blocks.
        *p = unsafe { p.add(Q8K_BYTES) };
    }
}
