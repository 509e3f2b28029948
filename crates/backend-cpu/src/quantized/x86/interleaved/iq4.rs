//! The IQ4_NL, MXFP4, Q4_0 and IQ4_XS group products (records in `crate::interleaved::iq4`
//! and `crate::interleaved::mxfp4`; Q4_0's is IQ4_NL's). A run's quant bytes become the
//! rows' levels by one byte shuffle through the codebook per nibble half, once per record
//! for every activation row; each run then meets the activation's 8-byte run broadcast to
//! every 64-bit lane, so a row's partial sums gather in its lane's two halves. No shuffle
//! per activation row. With AVX-512 BW and VNNI, the 512-bit products of `iq4_wide.rs` run
//! instead (a whole run per vector). Here, on 256-bit vectors (four rows per vector, two
//! vectors per run), the two halves of each row are folded once per sub-block by one `hadd`
//! and one permute, which leave the eight rows in order. The arithmetics:
//!
//! - VNNI: the codebook biased to unsigned bytes (`level + 128`), one `vpdpbusd` per
//!   vector into i32 lanes, less `128 · Σ a` per sub-block (the activation's sums: Q8_0's
//!   per-block sums, Q8_K's `bsums`).
//! - AVX2: the signed levels; each product is `maddubs` of `|level|` with the activation
//!   bytes given the levels' signs, then `madd` (a pair of products reaches at most
//!   2 · 127 · 127, within 16 bits; two pairs would not be).
//! - Q4_0 ([`Levels::Offset8`]) takes no shuffle: its nibbles go to the products as
//!   unsigned bytes, less `8 · Σ a` per block, with or without VNNI.
//!
//! The sub-block sums are exact integers; IQ4_NL and MXFP4 scale each block's sums in
//! f32 (one FMA per block, as Q4_0; MXFP4's E8M0 exponents become f32 scales exactly),
//! IQ4_XS multiplies them by the rows' 6-bit scales in i32 (`vpmulld`) and converts once
//! per super-block (one FMA per 256 values).

use std::arch::x86_64::*;

use tempra_tensor::quant::KVALUES_MXFP4;
use tempra_tensor::quant::iq_grids::KVALUES_IQ4NL;

use super::super::vectors::{prefetch_record, store_lanes};
use super::super::{GroupProduct, IntDots, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use super::iq4_wide;
use crate::interleaved::iq4::{D, NL_QS, NL_RECORD, SUB_BLOCK_RUNS, XS_QS, XS_RECORD, XS_SCALES};
use crate::interleaved::mxfp4;
use crate::quantized::kernels::ActRow;
use crate::x86::Avx2;

/// Bytes of a Q8_0 activation block.
pub(super) const Q8_0_BYTES: usize = 34;

/// `levels` biased to unsigned bytes (`level + 128`) for `vpdpbusd`.
const fn biased(levels: &[i8; 16]) -> [i8; 16] {
    let mut biased = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        biased[i] = (levels[i] as i16 + 128) as u8 as i8;
        i += 1;
    }
    biased
}

/// How a record's nibbles become levels.
pub(in crate::quantized::x86) enum Levels {
    /// Through a 16-entry codebook (IQ4_NL, IQ4_XS, MXFP4): `signed` for the AVX2
    /// products, `biased` (`level + 128`) for the VNNI ones.
    Codebook {
        /// The levels.
        signed: [i8; 16],
        /// The levels biased to unsigned bytes.
        biased: [i8; 16],
    },
    /// The nibble less 8 (Q4_0): the products take the nibbles as they are (unsigned, no
    /// shuffle) and subtract `8 · Σ a`.
    Offset8,
}

impl Levels {
    /// The codebook `signed`.
    const fn codebook(signed: [i8; 16]) -> Levels {
        Levels::Codebook {
            signed,
            biased: biased(&signed),
        }
    }

    /// What a product's sum carries beyond `Σ level · a`, per unit of `Σ a`, with or
    /// without VNNI.
    pub(super) const fn bias(&self, vnni: bool) -> i32 {
        match self {
            Levels::Codebook { .. } if vnni => 128,
            Levels::Codebook { .. } => 0,
            Levels::Offset8 => 8,
        }
    }
}

/// IQ4_NL's (and IQ4_XS's) codebook.
pub(super) const IQ4_LEVELS: Levels = Levels::codebook(KVALUES_IQ4NL);

/// A 32-value format whose records hold eight rows' blocks of 4-bit nibbles in IQ4_NL's
/// two runs after one scale per row: Q4_0 and IQ4_NL (f16 `d`), MXFP4 (E8M0 `e`). Each
/// pairs with Q8_0 activations.
pub(in crate::quantized::x86) trait NibbleBlocks {
    /// Bytes of one record.
    const RECORD: usize;
    /// Offset of the record's runs.
    const QS: usize;
    /// How the nibbles become levels.
    const LEVELS: Levels;

    /// The eight rows' scales of the record at `record` as f32, rows in order (by
    /// default the f16 `d` that open IQ4_NL's record).
    ///
    /// # Safety
    ///
    /// A readable record at `record`.
    #[inline(always)]
    unsafe fn scales(_: Avx2, record: *const u8) -> __m256 {
        // SAFETY: the record's 16 scale bytes; the token proves F16C.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i)) }
    }

    /// Each row's scale in both 32-bit lanes of its pair of a 512-bit vector (the
    /// products of `iq4_wide.rs`; by default from the f16 `d`).
    ///
    /// # Safety
    ///
    /// A readable record at `record`; the CPU has AVX-512 F and BW (the caller is
    /// compiled with them).
    #[inline(always)]
    unsafe fn pair_scales(record: *const u8) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe {
            let d = _mm_loadu_si128(record.add(D) as *const __m128i);
            _mm512_cvtph_ps(_mm256_set_m128i(
                _mm_unpackhi_epi16(d, d),
                _mm_unpacklo_epi16(d, d),
            ))
        }
    }
}

/// Q4_0's records (IQ4_NL's: the rows' f16 `d`, then the runs); the levels `q − 8`.
pub(in crate::quantized::x86) struct Q4_0Record;

impl NibbleBlocks for Q4_0Record {
    const RECORD: usize = NL_RECORD;
    const QS: usize = NL_QS;
    const LEVELS: Levels = Levels::Offset8;
}

/// IQ4_NL's records: the rows' f16 `d`, then the runs.
pub(in crate::quantized::x86) struct Iq4NlRecord;

impl NibbleBlocks for Iq4NlRecord {
    const RECORD: usize = NL_RECORD;
    const QS: usize = NL_QS;
    const LEVELS: Levels = IQ4_LEVELS;
}

/// MXFP4's records: the rows' E8M0 exponents, then the runs; the doubled E2M1 levels.
pub(in crate::quantized::x86) struct Mxfp4Record;

impl NibbleBlocks for Mxfp4Record {
    const RECORD: usize = mxfp4::RECORD;
    const QS: usize = mxfp4::QS;
    const LEVELS: Levels = Levels::codebook(KVALUES_MXFP4);

    #[inline(always)]
    unsafe fn scales(_: Avx2, record: *const u8) -> __m256 {
        // SAFETY: the record's eight exponent bytes; the token proves AVX2.
        unsafe {
            let e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(record.add(mxfp4::E) as *const __m128i));
            // `e8m0_to_f32_half`'s bits: `(e − 1) << 23` from e = 2 on, else the
            // subnormal `0x0020_0000 << e`.
            let normal = _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, _mm256_set1_epi32(1)));
            let tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x0020_0000), e);
            let is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
            _mm256_castsi256_ps(_mm256_blendv_epi8(tiny, normal, is_normal))
        }
    }

    #[inline(always)]
    unsafe fn pair_scales(record: *const u8) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe {
            let e = _mm_loadl_epi64(record.add(mxfp4::E) as *const __m128i);
            let e = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(e, e));
            // As `scales`, on sixteen lanes.
            let normal = _mm512_slli_epi32::<23>(_mm512_sub_epi32(e, _mm512_set1_epi32(1)));
            let tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x0020_0000), e);
            let is_normal = _mm512_cmpgt_epi32_mask(e, _mm512_set1_epi32(1));
            _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, tiny, normal))
        }
    }
}

/// The codebook of `levels` in both 128-bit halves (for `pshufb`): biased for VNNI,
/// signed for AVX2 (zero for [`Levels::Offset8`], which needs none).
#[inline(always)]
fn codebook<I: IntDots>(_: I, levels: &Levels) -> __m256i {
    let book = match levels {
        Levels::Codebook { biased, .. } if I::VNNI => biased,
        Levels::Codebook { signed, .. } => signed,
        Levels::Offset8 => &[0; 16],
    };
    // SAFETY: every token proves AVX2; 16 readable bytes.
    unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(book.as_ptr() as *const __m128i)) }
}

/// The weight bytes of the nibbles `n` (each 0..16): their codebook entries, or the
/// nibbles themselves for [`Levels::Offset8`].
#[inline(always)]
fn weight_bytes(levels: &Levels, book: __m256i, n: __m256i) -> __m256i {
    match levels {
        // SAFETY: every token proves AVX2.
        Levels::Codebook { .. } => unsafe { _mm256_shuffle_epi8(book, n) },
        Levels::Offset8 => n,
    }
}

/// `acc` plus the products of the weight bytes `w_lo`, `w_hi` ([`weight_bytes`]) and the
/// activation bytes `a_lo`, `a_hi`, in i32 lanes: unsigned weights go to the products as
/// they are (on AVX2 both `maddubs` summed in 16 bits, as for Q4_0's row-major dots),
/// signed codebook levels without VNNI lend their signs to the activations.
#[inline(always)]
fn products<I: IntDots>(
    isa: I,
    levels: &Levels,
    acc: __m256i,
    (w_lo, a_lo): (__m256i, __m256i),
    (w_hi, a_hi): (__m256i, __m256i),
) -> __m256i {
    match levels {
        Levels::Codebook { .. } if !I::VNNI => {
            let signed = |w: __m256i, a: __m256i| {
                // SAFETY: every token proves AVX2.
                unsafe { (_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)) }
            };
            let (m_lo, s_lo) = signed(w_lo, a_lo);
            let (m_hi, s_hi) = signed(w_hi, a_hi);
            isa.dpbusd(isa.dpbusd(acc, m_lo, s_lo), m_hi, s_hi)
        }
        Levels::Offset8 if !I::VNNI => {
            // SAFETY: every token proves AVX2.
            unsafe { _mm256_add_epi32(acc, isa.dpbusd_nibbles(w_lo, a_lo, w_hi, a_hi)) }
        }
        _ => isa.dpbusd(isa.dpbusd(acc, w_lo, a_lo), w_hi, a_hi),
    }
}

/// Each row's `Σ level · a` over one 32-value sub-block (eight i32 lanes, rows in order):
/// the two runs at `q` against the 32 activation quants at each `a[r]`, plus
/// `levels.bias(I::VNNI) · Σ a` ([`unbiased`] takes it back).
///
/// # Safety
///
/// 128 readable bytes at `q`, 32 at each `a[r]`.
#[inline(always)]
unsafe fn sub_block_sums<I: IntDots, const R: usize>(
    isa: I,
    levels: &Levels,
    book: __m256i,
    q: *const u8,
    a: &[*const u8; R],
) -> [__m256i; R] {
    // SAFETY: the token proves AVX2.
    let (zero, m4) = unsafe { (_mm256_setzero_si256(), _mm256_set1_epi8(0x0F)) };
    // `acc[h][r]`: rows `4h .. 4h + 4`, row `4h + l` in 32-bit lanes `2l` and `2l + 1`.
    let mut acc = [[zero; R]; 2];
    for p in 0..2 {
        for (h, acc) in acc.iter_mut().enumerate() {
            // SAFETY: half `h` of run `p` at `q`; the token proves AVX2.
            let (w_lo, w_hi) = unsafe {
                let v = _mm256_loadu_si256(q.add(64 * p + 32 * h) as *const __m256i);
                (
                    weight_bytes(levels, book, _mm256_and_si256(v, m4)),
                    weight_bytes(levels, book, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4)),
                )
            };
            for r in 0..R {
                // SAFETY: values `8p ..` and `16 + 8p ..` of the sub-block at `a[r]`.
                let (a_lo, a_hi) = unsafe {
                    let at = a[r].add(8 * p);
                    (
                        _mm256_set1_epi64x(std::ptr::read_unaligned(at as *const i64)),
                        _mm256_set1_epi64x(std::ptr::read_unaligned(at.add(16) as *const i64)),
                    )
                };
                acc[r] = products(isa, levels, acc[r], (w_lo, a_lo), (w_hi, a_hi));
            }
        }
    }
    let mut sums = acc[0];
    for (r, sums) in sums.iter_mut().enumerate() {
        // `hadd` leaves rows (0, 1), (4, 5) in the low lane and (2, 3), (6, 7) in the
        // high one; the permute puts the four pairs in order.
        // SAFETY: the token proves AVX2.
        *sums =
            unsafe { _mm256_permute4x64_epi64::<0xD8>(_mm256_hadd_epi32(acc[0][r], acc[1][r])) };
    }
    sums
}

/// `sums` less their bias `levels.bias(I::VNNI) · Σ a` (the activation sub-block's sum
/// `a_sum`).
#[inline(always)]
fn unbiased<I: IntDots>(_: I, levels: &Levels, sums: __m256i, a_sum: i32) -> __m256i {
    match levels.bias(I::VNNI) {
        0 => sums,
        // SAFETY: every token proves AVX2.
        bias => unsafe { _mm256_sub_epi32(sums, _mm256_set1_epi32(bias * a_sum)) },
    }
}

/// The IQ4_NL or MXFP4 group product (against Q8_0 activation rows with their block
/// scales and sums).
pub(in crate::quantized::x86) struct NibbleGroup<F>(std::marker::PhantomData<F>);

impl<F: NibbleBlocks> GroupProduct for NibbleGroup<F> {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        if let Some(wide) = isa.avx512_vnni() {
            // SAFETY: the caller's contract; the token proves AVX-512 BW and VNNI.
            return unsafe { iq4_wide::nibble_product::<F, R>(wide, nb, w, acts, out) };
        }
        let s = isa.avx2();
        let book = codebook(isa, &F::LEVELS);
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group (the `GemmR8Fn` contract).
            let record = unsafe { w.add(b * F::RECORD) };
            prefetch_record(s, record, F::RECORD.div_ceil(64));
            let mut a = [std::ptr::null::<u8>(); R];
            for (r, a) in a.iter_mut().enumerate() {
                // SAFETY: block `b` of each activation row (the contract).
                *a = unsafe { acts.get_unchecked(r).blocks.add(b * Q8_0_BYTES + 2) };
            }
            // SAFETY: the record's runs and the blocks' quants are readable (above).
            let sums = unsafe { sub_block_sums(isa, &F::LEVELS, book, record.add(F::QS), &a) };
            // SAFETY: the record's scales, and block `b`'s scale and sum of each row (the
            // contract); the token proves AVX2 and FMA.
            unsafe {
                let d = F::scales(s, record);
                for r in 0..R {
                    let act = acts.get_unchecked(r);
                    let sums = unbiased(isa, &F::LEVELS, sums[r], *act.sums.add(b));
                    let da = _mm256_set1_ps(*act.scales.add(b));
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(sums), acc[r]);
                }
            }
        }
        store_lanes(s, &acc, out);
    }
}

/// The IQ4_XS group product (against Q8_K activation rows).
pub(in crate::quantized::x86) struct Iq4XsGroup;

impl GroupProduct for Iq4XsGroup {
    #[inline(always)]
    unsafe fn product<I: IntDots, const R: usize>(
        isa: I,
        nb: usize,
        w: *const u8,
        acts: &[ActRow],
        out: &mut [[f32; 8]],
    ) {
        if let Some(wide) = isa.avx512_vnni() {
            // SAFETY: the caller's contract; the token proves AVX-512 BW and VNNI.
            return unsafe { iq4_wide::xs_product::<R>(wide, nb, w, acts, out) };
        }
        let s = isa.avx2();
        let book = codebook(isa, &IQ4_LEVELS);
        // SAFETY: the token proves AVX.
        let mut acc = [unsafe { _mm256_setzero_ps() }; R];
        for b in 0..nb {
            // SAFETY: record `b < nb` of the group (the `GemmR8Fn` contract).
            let record = unsafe { w.add(b * XS_RECORD) };
            let mut blocks = [std::ptr::null::<u8>(); R];
            for (r, block) in blocks.iter_mut().enumerate() {
                // SAFETY: super-block `b` of each activation row (the contract).
                *block = unsafe { acts.get_unchecked(r).blocks.add(b * Q8K_BYTES) };
            }
            // SAFETY: the token proves AVX.
            let mut total = [unsafe { _mm256_setzero_si256() }; R];
            for j in 0..8 {
                // The record's lines ahead, an eighth per sub-block (spread out, as Q4_K's).
                // SAFETY: the eighth lies inside the record.
                let eighth = unsafe { record.add(XS_RECORD / 8 * j) };
                prefetch_record(s, eighth, XS_RECORD.div_ceil(8 * 64));
                let mut a = [std::ptr::null::<u8>(); R];
                for r in 0..R {
                    // SAFETY: sub-block `j`'s quants inside each Q8_K block.
                    a[r] = unsafe { blocks[r].add(Q8K_QS + 32 * j) };
                }
                // SAFETY: sub-block `j`'s runs inside the record, its quants at `a`.
                let sums = unsafe {
                    sub_block_sums(
                        isa,
                        &IQ4_LEVELS,
                        book,
                        record.add(XS_QS + SUB_BLOCK_RUNS * j),
                        &a,
                    )
                };
                // SAFETY: the sub-block's eight scale bytes inside the record, and the two
                // 16-value sums of each Q8_K block; the token proves AVX2.
                unsafe {
                    let scales = _mm256_cvtepi8_epi32(_mm_loadl_epi64(
                        record.add(XS_SCALES + 8 * j) as *const __m128i,
                    ));
                    for r in 0..R {
                        let bsums = blocks[r].add(Q8K_BSUMS + 4 * j) as *const i16;
                        let a_sum = std::ptr::read_unaligned(bsums) as i32
                            + std::ptr::read_unaligned(bsums.add(1)) as i32;
                        let sums = unbiased(isa, &IQ4_LEVELS, sums[r], a_sum);
                        total[r] = _mm256_add_epi32(total[r], _mm256_mullo_epi32(sums, scales));
                    }
                }
            }
            // SAFETY: the record's scales and each Q8_K block's `d`; the token proves AVX2,
            // FMA and F16C.
            unsafe {
                let d = _mm256_cvtph_ps(_mm_loadu_si128(record.add(D) as *const __m128i));
                for r in 0..R {
                    let da = _mm256_set1_ps(std::ptr::read_unaligned(blocks[r] as *const f32));
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(total[r]), acc[r]);
                }
            }
        }
        store_lanes(s, &acc, out);
    }
}

#[cfg(test)]
mod tests {
    use tempra_tensor::quant::e8m0_to_f32_half;

    use super::*;
    use crate::isa::{Isa, Level};

    /// MXFP4's record scales on 256-bit vectors and in 512-bit pairs: every exponent the
    /// format can hold (the subnormal ones too) as `e8m0_to_f32_half` makes it, bit for
    /// bit.
    #[test]
    fn mxfp4_scales_are_e8m0_exactly() {
        if Level::new(Isa::Avx2).is_none() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // SAFETY: the level proves AVX2, FMA and F16C.
        let s = unsafe { Avx2::new_unchecked() };
        let wide = Level::new(Isa::Avx512).is_some();
        for first in (0..256).step_by(8) {
            let mut record = [0u8; mxfp4::RECORD];
            for r in 0..8 {
                record[mxfp4::E + r] = (first + r) as u8;
            }
            let want: Vec<u32> = (0..8)
                .map(|r| e8m0_to_f32_half((first + r) as u8).to_bits())
                .collect();
            let mut got = [0f32; 8];
            // SAFETY: a whole record; the token proves AVX2.
            unsafe { _mm256_storeu_ps(got.as_mut_ptr(), Mxfp4Record::scales(s, record.as_ptr())) };
            assert_eq!(got.map(f32::to_bits).to_vec(), want, "exponents {first}..");
            if wide {
                // SAFETY: the level proves AVX-512 F and BW; a whole record.
                let pairs = unsafe { wide_pairs(&record) };
                let pairs: Vec<u32> = pairs.iter().map(|v| v.to_bits()).collect();
                let doubled: Vec<u32> = want.iter().flat_map(|&b| [b, b]).collect();
                assert_eq!(pairs, doubled, "pairs of exponents {first}..");
            }
        }
    }

    /// [`Mxfp4Record::pair_scales`] of `record`, stored.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512 F and BW.
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    unsafe fn wide_pairs(record: &[u8; mxfp4::RECORD]) -> [f32; 16] {
        let mut out = [0f32; 16];
        // SAFETY: a whole record; 16 writable f32s; the caller's features.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), Mxfp4Record::pair_scales(record.as_ptr())) };
        out
    }
}
