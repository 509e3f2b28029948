//! The x86 quantized products: integer dot products after ggml's AVX2 kernels (weights
//! unpacked to bytes, u8 × i8 sums, one f32 FMA per block: per 32 values for the legacy
//! formats, per 256 for K-quants), each written once as a generic function over an
//! [`IntDots`] token (`int_dots.rs`): [`Avx2`] (`maddubs` and `madd`), [`Vnni<Avx2>`]
//! (AVX-VNNI `vpdpbusd`/`vpdpwssd`) or [`Vnni<Avx512>`] (the AVX-512 VNNI encoding).
//! [`table_for`] picks the token from the backend's dispatch [`Level`] and the CPU's
//! features, and builds the table of its `#[target_feature]` entry points.
//!
//! - `row_major/`: one weight row (as GGUF stores it) against one to four activation
//!   rows: `legacy.rs` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), `k_quants.rs` (Q2_K … Q6_K).
//! - `interleaved/`: one group of eight prepared rows against one to four (or eight)
//!   activation rows: `legacy.rs` (Q4_0, Q8_0, with `q8_0_sums.rs`), `q4_k.rs` (Q4_K,
//!   Q5_K), `q6_k.rs`, `iq4.rs` and `iq4_wide.rs` (IQ4_NL, IQ4_XS), `ternary.rs` (TQ1_0,
//!   TQ2_0).
//! - `iquants/`: the row-major dots of the I-quant and ternary formats (IQ4_NL, IQ4_XS,
//!   IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_S, IQ1_M, TQ1_0, TQ2_0).
//! - `vectors.rs`: the AVX2 steps they share; `quantize.rs`: the activation quantizers.

mod int_dots;
mod interleaved;
mod iquants;
mod quantize;
mod row_major;
mod vectors;

pub(crate) use int_dots::{IntDots, Vnni};

use super::kernels::{ActRow, DotFn, FORMATS, GroupKernel, QuantKernels};
use crate::interleaved::InterleavedLayout;
use crate::isa::{Isa, Level};
use crate::x86::{Avx2, Avx512};

/// Bytes of a Q8_K block (the K-quants' activations): `d: f32`, `qs: [i8; 256]`,
/// `bsums: [i16; 16]` (sums of 16 consecutive `qs`).
const Q8K_BYTES: usize = 292;
/// Offset of a Q8_K block's `qs`.
const Q8K_QS: usize = 4;
/// Offset of a Q8_K block's `bsums`.
const Q8K_BSUMS: usize = 260;

/// A dot product over row-major weights: one weight row against `R` (1..=4) activation
/// rows.
pub(super) trait RowDot {
    /// `out[r] = Σ_blocks w · acts[r]` for `r < R`.
    ///
    /// # Safety
    ///
    /// The [`DotFn`] contract, with `acts.len() >= R` and `out.len() >= R`; the caller is
    /// compiled for `isa`'s features (its entry point).
    unsafe fn dot<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    );
}

/// A product over one group of eight prepared (row-interleaved) weight rows against `R`
/// (1..=4) activation rows.
pub(super) trait GroupProduct {
    /// `out[r][i] = Σ_blocks w_i · acts[r]` for `r < R`.
    ///
    /// # Safety
    ///
    /// The [`GemmR8Fn`](super::kernels::GemmR8Fn) contract, with `acts.len() >= R` and `out.len() >= R`; the caller
    /// is compiled for `isa`'s features (its entry point).
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    );
}

/// `K`'s dot product on `I` for `acts.len()` (1..=4) activation rows.
///
/// # Safety
///
/// The [`DotFn`] contract; the CPU has `I`'s features.
unsafe fn dot_rows<I: IntDots, K: RowDot>(
    nb: usize,
    w: *const u8,
    acts: &[*const u8],
    out: &mut [f32],
) {
    // SAFETY: the caller's contract; `R` equals `acts.len()` (1..=4).
    unsafe {
        match acts.len() {
            1 => I::dot_entry::<K, 1>(nb, w, acts, out),
            2 => I::dot_entry::<K, 2>(nb, w, acts, out),
            3 => I::dot_entry::<K, 3>(nb, w, acts, out),
            _ => I::dot_entry::<K, 4>(nb, w, acts, out),
        }
    }
}

/// `K`'s group product on `I` for `acts.len()` (1..=4) activation rows, as a
/// [`GroupKernel`] of four rows.
///
/// # Safety
///
/// The [`GemmR8Fn`](super::kernels::GemmR8Fn) contract; the CPU has `I`'s features.
unsafe fn group_rows<I: IntDots, K: GroupProduct>(
    nb: usize,
    w: *const u8,
    acts: &[ActRow],
    out: &mut [[f32; 8]],
) {
    // SAFETY: the caller's contract; `R` equals `acts.len()` (1..=4).
    unsafe {
        match acts.len() {
            1 => I::group_entry::<K, 1>(nb, w, acts, out),
            2 => I::group_entry::<K, 2>(nb, w, acts, out),
            3 => I::group_entry::<K, 3>(nb, w, acts, out),
            _ => I::group_entry::<K, 4>(nb, w, acts, out),
        }
    }
}

/// `K`'s group product on `I` for `acts.len()` (1..=8) activation rows: a product whose
/// registers hold eight rows where `I` has 512-bit VNNI products (`wide`), else
/// [`group_rows`]'s four.
///
/// # Safety
///
/// The [`GemmR8Fn`](super::kernels::GemmR8Fn) contract (with up to eight rows); the CPU has `I`'s features.
unsafe fn group_rows_wide<I: IntDots, K: GroupProduct>(
    nb: usize,
    w: *const u8,
    acts: &[ActRow],
    out: &mut [[f32; 8]],
) {
    // SAFETY: the caller's contract; `R` equals `acts.len()` (1..=8).
    unsafe {
        match acts.len() {
            1 => I::group_entry::<K, 1>(nb, w, acts, out),
            2 => I::group_entry::<K, 2>(nb, w, acts, out),
            3 => I::group_entry::<K, 3>(nb, w, acts, out),
            4 => I::group_entry::<K, 4>(nb, w, acts, out),
            5 => I::group_entry::<K, 5>(nb, w, acts, out),
            6 => I::group_entry::<K, 6>(nb, w, acts, out),
            7 => I::group_entry::<K, 7>(nb, w, acts, out),
            _ => I::group_entry::<K, 8>(nb, w, acts, out),
        }
    }
}

/// `K`'s [`GroupKernel`]: eight rows per call when `wide` (512-bit registers), else four.
fn group_kernel<I: IntDots, K: GroupProduct>(wide: bool) -> GroupKernel {
    if wide {
        GroupKernel {
            product: group_rows_wide::<I, K>,
            rows: 8,
        }
    } else {
        GroupKernel {
            product: group_rows::<I, K>,
            rows: 4,
        }
    }
}

/// The kernel table of the token `I`: a token exists only on a CPU with its features, so
/// every entry of the table runs here.
fn table<I: IntDots>(isa: I) -> QuantKernels {
    use interleaved::{iq4, legacy as il, q4_k, q6_k, ternary};
    use iquants::{Blocks, SubBlockKernel as Sub};
    use row_major::{k_quants as k, legacy as lg};
    let dots: [DotFn; FORMATS.len()] = [
        dot_rows::<I, lg::Legacy<lg::Q4_0>>,
        dot_rows::<I, lg::Legacy<lg::Q4_1>>,
        dot_rows::<I, lg::Legacy<lg::Q5_0>>,
        dot_rows::<I, lg::Legacy<lg::Q5_1>>,
        dot_rows::<I, lg::Legacy<lg::Q8_0>>,
        dot_rows::<I, k::KQuant<k::Q2K>>,
        dot_rows::<I, k::KQuant<k::Q3K>>,
        dot_rows::<I, k::KQuant<k::Q4K>>,
        dot_rows::<I, k::KQuant<k::Q5K>>,
        dot_rows::<I, k::KQuant<k::Q6K>>,
        dot_rows::<I, lg::Legacy<iquants::Iq4Nl>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq4Xs>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq3S>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq3Xxs>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq2S>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq2Xs>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq2Xxs>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq1S>>>,
        dot_rows::<I, Blocks<Sub<iquants::Iq1M>>>,
        dot_rows::<I, Blocks<iquants::Tq1_0>>,
        dot_rows::<I, Blocks<iquants::Tq2_0>>,
        dot_rows::<I, lg::Legacy<iquants::Mxfp4>>,
    ];
    // Eight-row GEMVs read the row-interleaved layouts only: over eight row-major rows
    // (eight streams) they were no faster than one-row dots from memory, while over the
    // interleaved layout (one stream) they read far faster than either.
    // The Q4_0, IQ4 and MXFP4 products hold eight activation rows in 512-bit registers.
    let wide = isa.avx512_vnni().is_some();
    let groups: [GroupKernel; InterleavedLayout::ALL.len()] = [
        group_kernel::<I, iq4::NibbleGroup<iq4::Q4_0Record>>(wide),
        group_kernel::<I, il::Q8_0Group>(false),
        group_kernel::<I, q4_k::K4Group<q4_k::Q4K>>(false),
        group_kernel::<I, q4_k::K4Group<q4_k::Q5K>>(false),
        group_kernel::<I, q6_k::Q6KGroup>(false),
        group_kernel::<I, iq4::NibbleGroup<iq4::Iq4NlRecord>>(wide),
        group_kernel::<I, iq4::Iq4XsGroup>(wide),
        group_kernel::<I, iq4::NibbleGroup<iq4::Mxfp4Record>>(wide),
        group_kernel::<I, ternary::TernaryGroup>(false),
        group_kernel::<I, ternary::TernaryGroup>(false),
    ];
    QuantKernels::new(I::NAME, quantize::quantize_activations, dots, groups)
}

/// The table for the dispatch level `level`: none at the scalar level; from the AVX2
/// level up the AVX2 kernels, with `vpdpbusd` products where the CPU has VNNI (the
/// AVX-512 VNNI encoding only at the AVX-512 level, else AVX-VNNI).
pub(crate) fn table_for(level: Level) -> Option<QuantKernels> {
    match level.isa() {
        Isa::Scalar => None,
        Isa::Avx2 => {
            // SAFETY: a `Level` for AVX2 exists only when the CPU has AVX2, FMA and F16C.
            let avx2 = unsafe { Avx2::new_unchecked() };
            Some(Vnni::<Avx2>::detect(avx2).map_or_else(|| table(avx2), table))
        }
        Isa::Avx512 => {
            // SAFETY: a `Level` for AVX-512 exists only when the CPU has AVX-512 F, BW
            // and VL with AVX2, FMA and F16C.
            let (avx512, avx2) = unsafe { (Avx512::new_unchecked(), Avx2::new_unchecked()) };
            Some(
                match (Vnni::<Avx512>::detect(avx512), Vnni::<Avx2>::detect(avx2)) {
                    (Some(vnni), _) => table(vnni),
                    (None, Some(vnni)) => table(vnni),
                    (None, None) => table(avx2),
                },
            )
        }
    }
}

/// Every table this CPU runs (the tests compare each with the reference).
#[cfg(test)]
pub(crate) fn available_tables() -> Vec<QuantKernels> {
    let mut tables = Vec::new();
    if Level::new(Isa::Avx2).is_some() {
        // SAFETY: the level proves AVX2, FMA and F16C.
        let avx2 = unsafe { Avx2::new_unchecked() };
        tables.push(table(avx2));
        tables.extend(Vnni::<Avx2>::detect(avx2).map(table));
    }
    if Level::new(Isa::Avx512).is_some() {
        // SAFETY: the level proves AVX-512 F, BW and VL with AVX2, FMA and F16C.
        let avx512 = unsafe { Avx512::new_unchecked() };
        tables.extend(Vnni::<Avx512>::detect(avx512).map(table));
    }
    tables
}

/// Whether this CPU runs the kernels here (the activation quantizers check it).
pub(crate) fn detected() -> bool {
    Isa::Avx2.is_available()
}
