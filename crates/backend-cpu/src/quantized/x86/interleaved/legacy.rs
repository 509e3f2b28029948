//! The Q8_0 group product (records in `crate::interleaved::legacy`).
//!
//! Per block column the eight rows' integer sums are folded into one vector by a `hadd`
//! tree that leaves them in the record's scale order (rows 0, 2, 4, 6, 1, 3, 5, 7), so
//! the eight f16 scales convert in one instruction and one FMA accumulates the column.
//! The sums are [`super::q8_0_sums`]' (32 quant bytes per row, two rows per 512-bit
//! register with AVX-512 VNNI).

use std::arch::x86_64::*;

use super::super::vectors::{prefetch_record, store_rows};
use super::super::{GroupProduct, IntDots};
use super::iq4::Q8_0_BYTES;
use crate::interleaved::InterleavedLayout;
use crate::quantized::kernels::ActRow;

/// The Q8_0 group product (32 signed quant bytes per row).
pub(in crate::quantized::x86) struct Q8_0Group;

impl GroupProduct for Q8_0Group {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        let s = isa.avx2();
        let record_bytes = InterleavedLayout::Q8_0R8.record_bytes();
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group and block `b` of each activation row
            // with its scale and sum (the `GemmR8Fn` contract); the token proves AVX2,
            // FMA and F16C.
            unsafe {
                let record = w.add(b * record_bytes);
                prefetch_record(s, record, record_bytes.div_ceil(64));
                let rows = isa.q8_0_rows(record.add(16));
                let w_scales = _mm256_cvtph_ps(_mm_loadu_si128(record as *const __m128i));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let act = acts.get_unchecked(r);
                    let sums =
                        isa.q8_0_sums(rows, act.blocks.add(b * Q8_0_BYTES + 2), *act.sums.add(b));
                    let d = _mm256_mul_ps(w_scales, _mm256_set1_ps(*act.scales.add(b)));
                    *acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), *acc);
                }
            }
        }
        store_rows(s, &acc, out);
    }
}
