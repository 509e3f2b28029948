//! [`IntDots`]: what the quantized kernels need from an instruction set beyond AVX2 (the
//! integer sums of u8 × i8 and i16 × i16 products), implemented for the crate's
//! [`Avx2`] token (`maddubs` and `madd`, after ggml's AVX2 kernels) and for
//! [`Vnni<Avx2>`] and [`Vnni<Avx512>`] (`vpdpbusd` and `vpdpwssd`, AVX-VNNI and AVX-512
//! VNNI). Each kernel is one generic `#[inline(always)]` function over `I: IntDots`; the
//! token's [`IntDots::dot_entry`] and [`IntDots::group_entry`] are the
//! `#[target_feature]` functions it is compiled into.

use std::arch::x86_64::*;

use super::interleaved::q8_0_sums;
use super::{GroupProduct, RowDot};
use crate::quantized::kernels::ActRow;
use crate::x86::{Avx2, Avx512};

/// An instruction set the quantized kernels run on: AVX2, FMA and F16C, plus the integer
/// dot products of [`IntDots::dpbusd`] and [`IntDots::dpwssd`]. A token exists only on
/// a CPU with every feature its entry points are compiled with.
pub(crate) trait IntDots: Copy + Send + Sync + 'static {
    /// The kernel table's name (`avx2`, `avx2+avx-vnni`, `avx2+avx512-vnni`).
    const NAME: &'static str;
    /// Whether u8 × i8 sums go straight into 32-bit lanes in one instruction (VNNI). The
    /// AVX2 kernels instead sum `maddubs` steps in 16 bits and widen once per sub-block.
    const VNNI: bool;
    /// A Q8_0 group record's eight quant rows, loaded and prepared for
    /// [`IntDots::q8_0_sums`].
    type Q8Rows: Copy;

    /// The AVX2 token every one of these instruction sets includes.
    fn avx2(self) -> Avx2;
    /// `acc + Σ4 u · s` per i32 lane (u8 × i8, four consecutive bytes): one `vpdpbusd`,
    /// or `maddubs` (pairs into i16, saturating only past 2 · 255 · 127, beyond every
    /// format's levels), `madd` by ones and an add.
    fn dpbusd(self, acc: __m256i, u: __m256i, s: __m256i) -> __m256i;
    /// `lo · a_lo + hi · a_hi` (u8 × i8) in i32 lanes of four consecutive bytes: two
    /// `vpdpbusd` (AVX2 overrides it: both `maddubs` summed in 16 bits, at most
    /// 2 · 2 · 15 · 128 for 4-bit levels, and one `madd`).
    #[inline(always)]
    fn dpbusd_nibbles(self, lo: __m256i, a_lo: __m256i, hi: __m256i, a_hi: __m256i) -> __m256i {
        // SAFETY: every token proves AVX.
        let zero = unsafe { _mm256_setzero_si256() };
        self.dpbusd(self.dpbusd(zero, lo, a_lo), hi, a_hi)
    }
    /// The token of AVX-512 BW and VNNI on 512-bit vectors, where this token stands for
    /// them (kernels with a 512-bit version call it through this).
    #[inline(always)]
    fn avx512_vnni(self) -> Option<Vnni<Avx512>> {
        None
    }
    /// `acc + madd(s, p)`: the i16 pairs of `s · p` summed into `acc`'s i32 lanes (one
    /// `vpdpwssd`).
    fn dpwssd(self, acc: __m256i, s: __m256i, p: __m256i) -> __m256i;

    /// The eight quant rows of a Q8_0 group record at `q`, as [`IntDots::q8_0_sums`]
    /// takes them.
    ///
    /// # Safety
    ///
    /// 256 readable bytes at `q`.
    unsafe fn q8_0_rows(self, q: *const u8) -> Self::Q8Rows;
    /// The eight row sums (in the record's scale order) of `rows` against the 32
    /// activation quants at `a`, whose sum is `a_sum`.
    ///
    /// # Safety
    ///
    /// 32 readable bytes at `a`.
    unsafe fn q8_0_sums(self, rows: Self::Q8Rows, a: *const u8, a_sum: i32) -> __m256i;

    /// Runs `K::dot::<Self, R>` compiled for this token's features.
    ///
    /// # Safety
    ///
    /// The CPU has this token's features; the [`crate::quantized::kernels::DotFn`]
    /// contract with `acts.len() >= R` and `out.len() >= R`.
    unsafe fn dot_entry<K: RowDot, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    );
    /// Runs `K::product::<Self, R>` compiled for this token's features.
    ///
    /// # Safety
    ///
    /// The CPU has this token's features; the [`crate::quantized::kernels::GemmR8Fn`]
    /// contract with `acts.len() >= R` and `out.len() >= R`.
    unsafe fn group_entry<K: GroupProduct, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    );
}

/// A token with VNNI beside the instruction set `T` proves: [`Vnni<Avx2>`] has AVX-VNNI
/// (VEX-encoded `vpdpbusd` on 256-bit vectors: Alder Lake and later, Zen 5),
/// [`Vnni<Avx512>`] has AVX-512 VNNI (EVEX-encoded, 256-bit vectors with VL and 512-bit
/// for the Q8_0 groups: Ice Lake, Sapphire Rapids, Zen 4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vnni<T>(T);

impl Vnni<Avx2> {
    /// The token, if this CPU has AVX-VNNI.
    pub(crate) fn detect(avx2: Avx2) -> Option<Self> {
        is_x86_feature_detected!("avxvnni").then_some(Vnni(avx2))
    }
}

impl Vnni<Avx512> {
    /// The token, if this CPU has AVX-512 VNNI.
    pub(crate) fn detect(avx512: Avx512) -> Option<Self> {
        is_x86_feature_detected!("avx512vnni").then_some(Vnni(avx512))
    }
}

// SAFETY (for every `unsafe` block in the impls below that does not say otherwise): a
// token exists only on a CPU with the features it names (`Avx2::new_unchecked`,
// `Vnni::detect`), so the intrinsics' features are present.

/// One `madd` of `s` by ones: the i16 pairs of each i32 lane summed.
#[inline(always)]
fn madd_ones(_: Avx2, s: __m256i) -> __m256i {
    // SAFETY: an `Avx2` token proves AVX2.
    unsafe { _mm256_madd_epi16(s, _mm256_set1_epi16(1)) }
}

impl IntDots for Avx2 {
    const NAME: &'static str = "avx2";
    const VNNI: bool = false;
    type Q8Rows = [__m256i; 8];

    #[inline(always)]
    fn avx2(self) -> Avx2 {
        self
    }
    #[inline(always)]
    fn dpbusd(self, acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        unsafe { _mm256_add_epi32(acc, madd_ones(self, _mm256_maddubs_epi16(u, s))) }
    }
    #[inline(always)]
    fn dpbusd_nibbles(self, lo: __m256i, a_lo: __m256i, hi: __m256i, a_hi: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        let s16 = unsafe {
            _mm256_add_epi16(
                _mm256_maddubs_epi16(lo, a_lo),
                _mm256_maddubs_epi16(hi, a_hi),
            )
        };
        madd_ones(self, s16)
    }
    #[inline(always)]
    fn dpwssd(self, acc: __m256i, s: __m256i, p: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(s, p)) }
    }
    #[inline(always)]
    unsafe fn q8_0_rows(self, q: *const u8) -> [__m256i; 8] {
        // SAFETY: the caller's 256 readable bytes; the token proves AVX2.
        unsafe { super::vectors::load::<8>(self, q) }
    }
    #[inline(always)]
    unsafe fn q8_0_sums(self, rows: [__m256i; 8], a: *const u8, _a_sum: i32) -> __m256i {
        // SAFETY: the caller's 32 readable bytes; the token proves AVX2.
        unsafe { q8_0_sums::signed(self, rows, a) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dot_entry<K: RowDot, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    ) {
        // SAFETY: the caller's contract; the CPU has AVX2, FMA and F16C (the caller's
        // contract), which `Avx2` stands for.
        unsafe { K::dot::<Self, R>(Avx2::new_unchecked(), nb, w, acts, out) }
    }
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn group_entry<K: GroupProduct, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        // SAFETY: as in `dot_entry`.
        unsafe { K::product::<Self, R>(Avx2::new_unchecked(), nb, w, acts, out) }
    }
}

impl IntDots for Vnni<Avx2> {
    const NAME: &'static str = "avx2+avx-vnni";
    const VNNI: bool = true;
    type Q8Rows = [__m256i; 8];

    #[inline(always)]
    fn avx2(self) -> Avx2 {
        self.0
    }
    #[inline(always)]
    fn dpbusd(self, acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        unsafe { _mm256_dpbusd_avx_epi32(acc, u, s) }
    }
    #[inline(always)]
    fn dpwssd(self, acc: __m256i, s: __m256i, p: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        unsafe { _mm256_dpwssd_avx_epi32(acc, s, p) }
    }
    #[inline(always)]
    unsafe fn q8_0_rows(self, q: *const u8) -> [__m256i; 8] {
        // SAFETY: the caller's 256 readable bytes; the token proves AVX2.
        unsafe { q8_0_sums::rows_biased(self.0, q) }
    }
    #[inline(always)]
    unsafe fn q8_0_sums(self, rows: [__m256i; 8], a: *const u8, a_sum: i32) -> __m256i {
        // SAFETY: the caller's 32 readable bytes; the token proves AVX2 and AVX-VNNI.
        unsafe { q8_0_sums::biased(self, rows, a, a_sum) }
    }

    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    unsafe fn dot_entry<K: RowDot, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    ) {
        // SAFETY: the caller's contract; the CPU has AVX2, FMA, F16C and AVX-VNNI (the
        // caller's contract), which `Vnni<Avx2>` stands for.
        unsafe { K::dot::<Self, R>(Vnni(Avx2::new_unchecked()), nb, w, acts, out) }
    }
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    unsafe fn group_entry<K: GroupProduct, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        // SAFETY: as in `dot_entry`.
        unsafe { K::product::<Self, R>(Vnni(Avx2::new_unchecked()), nb, w, acts, out) }
    }
}

impl IntDots for Vnni<Avx512> {
    const NAME: &'static str = "avx2+avx512-vnni";
    const VNNI: bool = true;
    type Q8Rows = [__m512i; 4];

    #[inline(always)]
    fn avx2(self) -> Avx2 {
        // SAFETY: an `Avx512` token proves AVX2, FMA and F16C too.
        unsafe { Avx2::new_unchecked() }
    }
    #[inline(always)]
    fn dpbusd(self, acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        unsafe { _mm256_dpbusd_epi32(acc, u, s) }
    }
    #[inline(always)]
    fn dpwssd(self, acc: __m256i, s: __m256i, p: __m256i) -> __m256i {
        // SAFETY: see the comment above the impls.
        unsafe { _mm256_dpwssd_epi32(acc, s, p) }
    }
    #[inline(always)]
    fn avx512_vnni(self) -> Option<Vnni<Avx512>> {
        Some(self)
    }
    #[inline(always)]
    unsafe fn q8_0_rows(self, q: *const u8) -> [__m512i; 4] {
        // SAFETY: the caller's 256 readable bytes; the token proves AVX-512 F.
        unsafe { q8_0_sums::row_pairs_biased(self, q) }
    }
    #[inline(always)]
    unsafe fn q8_0_sums(self, rows: [__m512i; 4], a: *const u8, a_sum: i32) -> __m256i {
        // SAFETY: the caller's 32 readable bytes; the token proves AVX-512 F and VNNI.
        unsafe { q8_0_sums::row_pairs(self, rows, a, a_sum) }
    }

    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    unsafe fn dot_entry<K: RowDot, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[*const u8],
        out: &mut [f32],
    ) {
        // SAFETY: the caller's contract; the CPU has AVX-512 F, VL and VNNI with AVX2, FMA
        // and F16C (the caller's contract), which `Vnni<Avx512>` stands for. (Not
        // compiled with BW: with it LLVM splits `vpdpwssd` into `vpmaddwd` + add and the
        // four-row products spill twice as much.)
        unsafe { K::dot::<Self, R>(Vnni(Avx512::new_unchecked()), nb, w, acts, out) }
    }
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    unsafe fn group_entry<K: GroupProduct, const R: usize>(
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        // SAFETY: as in `dot_entry`.
        unsafe { K::product::<Self, R>(Vnni(Avx512::new_unchecked()), nb, w, acts, out) }
    }
}
