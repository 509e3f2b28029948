//! Matrix-vector products for `linear` with one input row (decode): `out[j] = x · w[j]`
//! over float weight rows `w [N, K]` (F32, F16, BF16) with unit column stride. Tasks
//! split the weight rows, so the weights are streamed once, in order: one row at a time
//! (one sequential stream per task, prefetched 4 KiB ahead), `x` from L1.

use std::ops::Range;

use half::slice::HalfFloatSliceExt;

use super::operand::Values;

/// Weight rows `rows` of `w` (row `j` starts at element `offset + j * row_stride`) dotted
/// with `x` (`x.len()` values per row) into `out[rows]` (indexed from `rows.start`).
pub(crate) fn gemv_rows(
    avx2: bool,
    x: &[f32],
    w: Values<'_>,
    offset: usize,
    row_stride: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    let k = x.len();
    let row = |j: usize| offset + j * row_stride;
    // Bounds for the raw-pointer kernels: every row of the range lies inside `w`.
    let fits = |len: usize| rows.is_empty() || row(rows.end - 1) + k <= len;
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        match w {
            Values::F32(v) if fits(v.len()) => {
                // SAFETY: AVX2/FMA/F16C were detected by the caller (`avx2`); every row
                // `row(j)..row(j) + k` lies inside `v` (checked by `fits`).
                unsafe { avx2::rows_f32(x, v.as_ptr(), offset, row_stride, rows, out) };
                return;
            }
            Values::F16(v) if fits(v.len()) => {
                // SAFETY: as above.
                unsafe {
                    avx2::rows_f16(x, v.as_ptr() as *const u16, offset, row_stride, rows, out)
                };
                return;
            }
            Values::BF16(v) if fits(v.len()) => {
                // SAFETY: as above; the pair kernel's length conditions are checked here.
                unsafe {
                    let w = v.as_ptr() as *const u16;
                    if k.is_multiple_of(16) && k <= avx2::PAIRS_MAX_K {
                        avx2::rows_bf16_pairs(x, w, offset, row_stride, rows, out)
                    } else {
                        avx2::rows_bf16(x, w, offset, row_stride, rows, out)
                    }
                };
                return;
            }
            _ => {}
        }
    }
    let _ = avx2;
    let mut buf = [0f32; 256];
    for (o, j) in out.iter_mut().zip(rows) {
        let start = row(j);
        *o = match w {
            Values::F32(v) => dot(x, &v[start..start + k]),
            Values::F16(v) => x
                .chunks(256)
                .zip(v[start..start + k].chunks(256))
                .map(|(xc, wc)| {
                    wc.convert_to_f32_slice(&mut buf[..wc.len()]);
                    dot(xc, &buf[..wc.len()])
                })
                .sum(),
            Values::BF16(v) => x
                .chunks(256)
                .zip(v[start..start + k].chunks(256))
                .map(|(xc, wc)| {
                    wc.convert_to_f32_slice(&mut buf[..wc.len()]);
                    dot(xc, &buf[..wc.len()])
                })
                .sum(),
            // Block-quantized weights take the quantized path, never this one.
            Values::Blocks { .. } => f32::NAN,
        };
    }
}

/// A plain dot product with 8 partial sums (vectorizable).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Loads 8 weights starting at `p` as f32.
    trait Load {
        /// # Safety
        ///
        /// 8 readable elements at `p`; AVX2, FMA, F16C present.
        unsafe fn load8(p: *const Self) -> __m256;
        /// # Safety
        ///
        /// 1 readable element at `p`.
        unsafe fn load1(p: *const Self) -> f32;
    }

    impl Load for f32 {
        #[inline(always)]
        unsafe fn load8(p: *const f32) -> __m256 {
            // SAFETY: 8 readable f32s.
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline(always)]
        unsafe fn load1(p: *const f32) -> f32 {
            // SAFETY: 1 readable f32.
            unsafe { *p }
        }
    }

    /// IEEE half bits.
    struct F16Bits;
    /// bfloat16 bits.
    struct Bf16Bits;

    /// The per-dtype loader over raw u16 storage.
    trait Half {
        /// # Safety
        ///
        /// 8 readable u16s at `p`; AVX2, F16C present.
        unsafe fn load8(p: *const u16) -> __m256;
        /// Converts one value.
        fn to_f32(bits: u16) -> f32;
    }

    impl Half for F16Bits {
        #[inline(always)]
        unsafe fn load8(p: *const u16) -> __m256 {
            // SAFETY: 8 readable halves; F16C present per the caller.
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)) }
        }
        fn to_f32(bits: u16) -> f32 {
            half::f16::from_bits(bits).to_f32()
        }
    }

    impl Half for Bf16Bits {
        #[inline(always)]
        unsafe fn load8(p: *const u16) -> __m256 {
            // SAFETY: 8 readable u16s; AVX2 present per the caller.
            unsafe {
                let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
                _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))
            }
        }
        fn to_f32(bits: u16) -> f32 {
            half::bf16::from_bits(bits).to_f32()
        }
    }

    /// How far ahead of the values being multiplied the weight stream is prefetched, one
    /// hint per line consumed. A 2048-wide F16 row is one 4 KiB page, and the hardware
    /// streamer starts cold on every page, so without the hints F16 decode waits at the
    /// start of every page; one page ahead keeps the stream going across page boundaries
    /// (an earlier variant was slower on Zen 3: re-check there).
    const PREFETCH_BYTES: usize = 4096;

    /// The sum of the 8 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// The shared loop: `load8`/`load1` read weights of one storage type.
    macro_rules! rows_impl {
        ($name:ident, $t:ty, $load8:expr, $load1:expr) => {
            /// # Safety
            ///
            /// AVX2, FMA, F16C present; for every `j` in `rows`, elements
            /// `offset + j*row_stride .. + x.len()` of `w` are readable;
            /// `out.len() >= rows.len()`.
            #[target_feature(enable = "avx2,fma,f16c")]
            pub(super) unsafe fn $name(
                x: &[f32],
                w: *const $t,
                offset: usize,
                row_stride: usize,
                rows: Range<usize>,
                out: &mut [f32],
            ) {
                let k = x.len();
                let k8 = k / 8 * 8;
                let xp = x.as_ptr();
                // One row at a time with four partial sums: the rows of the range are
                // one sequential stream for the hardware prefetcher (four interleaved
                // rows were four streams a row apart; in interleaved `cargo xtask
                // bench-facade --quick --filter f16` runs this measured as fast or
                // faster, within the machine's noise); `x` stays in L1.
                for (o, j) in out.iter_mut().zip(rows) {
                    // SAFETY: row `j` is in range; reads stay below `k`.
                    unsafe {
                        let w = w.add(offset + j * row_stride);
                        let mut acc = [_mm256_setzero_ps(); 4];
                        let mut e = 0;
                        while e + 32 <= k8 {
                            let ahead = w.wrapping_add(e + PREFETCH_BYTES / size_of::<$t>());
                            for line in 0..(32 * size_of::<$t>()).div_ceil(64) {
                                _mm_prefetch::<_MM_HINT_T0>(
                                    (ahead as *const i8).wrapping_add(64 * line),
                                );
                            }
                            for (u, a) in acc.iter_mut().enumerate() {
                                let at = e + 8 * u;
                                *a = _mm256_fmadd_ps(
                                    _mm256_loadu_ps(xp.add(at)),
                                    $load8(w.add(at)),
                                    *a,
                                );
                            }
                            e += 32;
                        }
                        while e < k8 {
                            acc[0] = _mm256_fmadd_ps(
                                _mm256_loadu_ps(xp.add(e)),
                                $load8(w.add(e)),
                                acc[0],
                            );
                            e += 8;
                        }
                        let sum = _mm256_add_ps(
                            _mm256_add_ps(acc[0], acc[1]),
                            _mm256_add_ps(acc[2], acc[3]),
                        );
                        let mut s = hsum(sum);
                        for t in k8..k {
                            s += x[t] * $load1(w.add(t));
                        }
                        *o = s;
                    }
                }
            }
        };
    }

    rows_impl!(rows_f32, f32, <f32 as Load>::load8, <f32 as Load>::load1);
    rows_impl!(rows_f16, u16, F16Bits::load8, |p: *const u16| {
        F16Bits::to_f32(*p)
    });
    rows_impl!(rows_bf16, u16, Bf16Bits::load8, |p: *const u16| {
        Bf16Bits::to_f32(*p)
    });

    /// The longest row [`rows_bf16_pairs`] splits `x` for (on the stack, 32 KiB).
    pub(super) const PAIRS_MAX_K: usize = 8192;

    /// BF16 rows read as 32-bit pairs: the even element of a pair is the pair shifted
    /// left by 16, the odd one the pair with its low half cleared — two integer ops, no
    /// shuffle, per eight pairs where `rows_bf16` widens each half with a shuffle
    /// (`vpmovzxwd`) and shifts it. `x` is split once per task (a range of rows) into
    /// runs of its eight even and eight odd values per 16, so the products stay exact f32
    /// FMAs. With fewer shuffles per pair, the GEMV from memory keeps slightly closer to
    /// the weight stream than `rows_bf16` (`decode_gemv_out_of_cache`,
    /// `PROBE_DTYPES=f16,bf16`).
    ///
    /// # Safety
    ///
    /// As `rows_bf16`; `x.len()` is a multiple of 16 and at most [`PAIRS_MAX_K`].
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn rows_bf16_pairs(
        x: &[f32],
        w: *const u16,
        offset: usize,
        row_stride: usize,
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        let k = x.len();
        // Only the first `k` values are written and read: not zeroing the other 32 KiB
        // saves a memset per task.
        let mut split = [std::mem::MaybeUninit::<f32>::uninit(); PAIRS_MAX_K];
        for (c, chunk) in x.chunks_exact(16).enumerate() {
            for i in 0..8 {
                split[16 * c + i].write(chunk[2 * i]);
                split[16 * c + 8 + i].write(chunk[2 * i + 1]);
            }
        }
        // Values `0..k` of `split` are initialized (`k` is a multiple of 16, every chunk
        // wrote its 16), and the loads below stay below `k`.
        let xp = split.as_ptr() as *const f32;
        let high = _mm256_set1_epi32(0xFFFF_0000u32 as i32);
        for (o, j) in out.iter_mut().zip(rows) {
            // SAFETY: row `j` is in range (the caller); reads stay below `k` in the row
            // and in `split` (`k <= PAIRS_MAX_K`, a multiple of 16).
            unsafe {
                let w = w.add(offset + j * row_stride);
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut e = 0;
                while e < k {
                    // Two 16-value steps per 64-byte line (one prefetch), one at the tail.
                    let steps = if e + 32 <= k { 2 } else { 1 };
                    if steps == 2 {
                        let ahead = w.wrapping_add(e + PREFETCH_BYTES / 2);
                        _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                    }
                    for h in 0..steps {
                        let at = e + 16 * h;
                        let v = _mm256_loadu_si256(w.add(at) as *const __m256i);
                        let even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
                        let odd = _mm256_castsi256_ps(_mm256_and_si256(v, high));
                        let (xe, xo) =
                            (_mm256_loadu_ps(xp.add(at)), _mm256_loadu_ps(xp.add(at + 8)));
                        acc[2 * h] = _mm256_fmadd_ps(xe, even, acc[2 * h]);
                        acc[2 * h + 1] = _mm256_fmadd_ps(xo, odd, acc[2 * h + 1]);
                    }
                    e += 16 * steps;
                }
                let sum =
                    _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
                *o = hsum(sum);
            }
        }
    }
}
