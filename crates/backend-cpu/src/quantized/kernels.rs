//! The table of quantized kernels for one ISA: the activation quantizer and one dot
//! product per weight format.

use tempra_tensor::quant::{self, QuantDot};
use tempra_tensor::{DType, Result};

/// `out[r] = Σ_blocks w · act[r]` for a weight row of `nb` blocks at `w` and
/// `acts.len()` (1..=4) activation rows of the partner format.
///
/// Safety contract of every `DotFn`: the CPU has the features the table was built for;
/// `w` points to `nb` readable weight blocks and each `acts[r]` to `nb` readable
/// activation blocks (any alignment); `out.len() == acts.len()`.
pub(crate) type DotFn = unsafe fn(usize, *const u8, &[*const u8], &mut [f32]);

/// One quantized activation row for the eight-row kernels. A Q8_0 row comes with its
/// per-block scales (f32) and sums of quants (i32), computed once per row so the kernels
/// do not redo them per row group; a Q8_K row's blocks carry both, and its `scales` and
/// `sums` are not read (see [`GemmR8Fn`] for what the callers put there).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ActRow {
    /// The row's blocks (Q8_0 or Q8_K).
    pub(crate) blocks: *const u8,
    /// Block `b`'s scale (Q8_0 rows; not read for Q8_K rows).
    pub(crate) scales: *const f32,
    /// Block `b`'s `Σ qs` (Q8_0 rows; not read for Q8_K rows).
    pub(crate) sums: *const i32,
}

/// `out[r][i] = Σ_blocks w_i · acts[r]` for the eight rows `w_i` of one row-interleaved
/// group ([`DType::Q4_0R8`], [`DType::Q8_0R8`], [`DType::Q4KR8`], [`DType::Q5KR8`],
/// [`DType::Q6KR8`]) at `w`, `nb` records long, and `acts.len()` (1..=4) activation rows
/// of the base format's partner ([`quant::vec_dot_dtype`]): Q8_0 for Q4_0R8 and Q8_0R8,
/// Q8_K for Q4KR8, Q5KR8 and Q6KR8.
///
/// Safety contract of every `GemmR8Fn`: the CPU has the features the table was built
/// for; `w` points to `nb` readable records of the group (any alignment);
/// `1 <= acts.len() <= 4` and `out.len() == acts.len()`; and each `acts[r]`, by the
/// group's dtype:
///
/// - Q4_0R8, Q8_0R8: `blocks` points to `nb` readable Q8_0 blocks (any alignment),
///   `scales` to `nb` readable, aligned f32s (block `b`'s scale `d` as f32) and `sums` to
///   `nb` readable, aligned i32s (block `b`'s `Σ qs`);
/// - Q4KR8, Q5KR8, Q6KR8: `blocks` points to `nb` readable Q8_K blocks (any alignment),
///   which carry their own scales and 16-value sums; `scales` and `sums` are not read and
///   may hold any value (`linear` passes null, or for its first row an empty slice's
///   dangling pointer; the tests pass null; the probe passes zeroed buffers).
pub(crate) type GemmR8Fn = unsafe fn(usize, *const u8, &[ActRow], &mut [[f32; 8]]);

/// Quantizes one f32 row into blocks of the given activation dtype.
pub(crate) type QuantizeFn = fn(DType, &[f32], &mut [u8]) -> Result<()>;

/// Kernels for one ISA.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QuantKernels {
    /// Name for benchmarks and test messages.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: &'static str,
    /// The activation quantizer.
    pub(crate) quantize: QuantizeFn,
    dots: [Option<DotFn>; 10],
    interleaved: [GemmR8Fn; 5],
}

/// The row-interleaved formats, in table order.
pub(crate) const INTERLEAVED: [DType; 5] = [
    DType::Q4_0R8,
    DType::Q8_0R8,
    DType::Q4KR8,
    DType::Q5KR8,
    DType::Q6KR8,
];

/// The weight formats, in table order.
pub(crate) const FORMATS: [DType; 10] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2K,
    DType::Q3K,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

impl QuantKernels {
    /// The dot product for weights of `dtype`, if it is a weight format.
    pub(crate) fn dot(&self, dtype: DType) -> Option<DotFn> {
        FORMATS
            .iter()
            .position(|&d| d == dtype)
            .and_then(|i| self.dots[i])
    }

    /// The product for one group of a row-interleaved `dtype` (every table has one).
    pub(crate) fn gemm_r8(&self, dtype: DType) -> Option<GemmR8Fn> {
        INTERLEAVED
            .iter()
            .position(|&d| d == dtype)
            .map(|i| self.interleaved[i])
    }

    /// This table with the row-interleaved products replaced (Q4_0R8, Q8_0R8, Q4KR8,
    /// Q5KR8, Q6KR8).
    pub(crate) fn with_interleaved(mut self, products: [GemmR8Fn; 5]) -> Self {
        self.interleaved = products;
        self
    }

    /// This table under another name (a variant of its ISA).
    pub(crate) fn renamed(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// This table with `dtype`'s dot product replaced.
    const fn with(mut self, dtype_index: usize, dot: DotFn) -> Self {
        self.dots[dtype_index] = Some(dot);
        self
    }
}

/// The reference dot product ([`quant::vec_dot`]) over raw pointers.
///
/// # Safety
///
/// See [`DotFn`].
unsafe fn scalar_dot<W: QuantDot>(nb: usize, w: *const u8, acts: &[*const u8], out: &mut [f32]) {
    // SAFETY: the caller guarantees `nb` weight blocks at `w`.
    let w = unsafe { std::slice::from_raw_parts(w, nb * size_of::<W>()) };
    for (&a, o) in acts.iter().zip(out) {
        // SAFETY: the caller guarantees `nb` activation blocks at `a`.
        let a = unsafe { std::slice::from_raw_parts(a, nb * size_of::<W::Activation>()) };
        // The lengths match by construction, so the reference cannot fail.
        *o = quant::vec_dot(W::DTYPE, w, a).unwrap_or(f32::NAN);
    }
}

/// The reference product over one row-interleaved group: each block is gathered back
/// to its base format and dotted by [`quant::vec_dot`], accumulated per block in f32 as
/// the reference does.
///
/// # Safety
///
/// See [`GemmR8Fn`].
unsafe fn scalar_gemm_r8<W: QuantDot>(
    nb: usize,
    w: *const u8,
    acts: &[ActRow],
    out: &mut [[f32; 8]],
) {
    let bb = size_of::<W>();
    let ab = size_of::<W::Activation>();
    let record = match W::DTYPE.interleaved() {
        Some(d) => 8 * d.block_bytes(),
        None => return,
    };
    // SAFETY: the caller guarantees `nb` records at `w`.
    let w = unsafe { std::slice::from_raw_parts(w, nb * record) };
    let mut block = [0u8; 256];
    for (act, out) in acts.iter().zip(out) {
        // SAFETY: the caller guarantees `nb` activation blocks at `act.blocks`.
        let a = unsafe { std::slice::from_raw_parts(act.blocks, nb * ab) };
        for (r, o) in out.iter_mut().enumerate() {
            let mut sum = 0f32;
            for b in 0..nb {
                let rec = &w[b * record..(b + 1) * record];
                quant::get_block(
                    W::DTYPE.interleaved().unwrap_or(W::DTYPE),
                    r,
                    rec,
                    &mut block[..bb],
                );
                // Whole blocks of matching formats: the reference cannot fail.
                sum += quant::vec_dot(W::DTYPE, &block[..bb], &a[b * ab..(b + 1) * ab])
                    .unwrap_or(f32::NAN);
            }
            *o = sum;
        }
    }
}

/// The portable table: ggml's scalar algorithms from `tempra_tensor::quant`.
pub(crate) const SCALAR: QuantKernels = QuantKernels {
    name: "scalar",
    quantize: quant::quantize_row,
    dots: [
        Some(scalar_dot::<quant::BlockQ4_0>),
        Some(scalar_dot::<quant::BlockQ4_1>),
        Some(scalar_dot::<quant::BlockQ5_0>),
        Some(scalar_dot::<quant::BlockQ5_1>),
        Some(scalar_dot::<quant::BlockQ8_0>),
        Some(scalar_dot::<quant::BlockQ2K>),
        Some(scalar_dot::<quant::BlockQ3K>),
        Some(scalar_dot::<quant::BlockQ4K>),
        Some(scalar_dot::<quant::BlockQ5K>),
        Some(scalar_dot::<quant::BlockQ6K>),
    ],
    interleaved: [
        scalar_gemm_r8::<quant::BlockQ4_0>,
        scalar_gemm_r8::<quant::BlockQ8_0>,
        scalar_gemm_r8::<quant::BlockQ4K>,
        scalar_gemm_r8::<quant::BlockQ5K>,
        scalar_gemm_r8::<quant::BlockQ6K>,
    ],
};

/// The AVX2 (+FMA, F16C) table if this CPU has those features.
pub(crate) fn avx2_kernels() -> Option<QuantKernels> {
    #[cfg(target_arch = "x86_64")]
    if super::x86::detected() {
        return Some(super::x86::table(SCALAR));
    }
    None
}

/// The AVX2 table with `vpdpbusd` products where this CPU has VNNI: the AVX-512 VNNI
/// encoding when `avx512` (the backend runs at the AVX-512 level) and the CPU has it,
/// else AVX-VNNI; `None` without VNNI or AVX2.
pub(crate) fn vnni_kernels(avx512: bool) -> Option<QuantKernels> {
    #[cfg(target_arch = "x86_64")]
    {
        use super::x86::{Vnni, vnni_table};
        let base = avx2_kernels()?;
        let encodings: &[Vnni] = if avx512 {
            &[Vnni::Avx512, Vnni::Avx]
        } else {
            &[Vnni::Avx]
        };
        encodings.iter().find_map(|&v| vnni_table(base, v))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = avx512;
        None
    }
}

/// Every table this CPU runs (the tests compare each with the reference).
#[cfg(test)]
pub(crate) fn available_kernels() -> Vec<QuantKernels> {
    let mut tables = vec![SCALAR];
    tables.extend(avx2_kernels());
    #[cfg(target_arch = "x86_64")]
    for vnni in [super::x86::Vnni::Avx, super::x86::Vnni::Avx512] {
        tables.extend(avx2_kernels().and_then(|base| super::x86::vnni_table(base, vnni)));
    }
    tables
}

impl QuantKernels {
    /// `base` with the entries for the given formats replaced (used by ISA modules).
    pub(crate) fn patched(
        base: QuantKernels,
        name: &'static str,
        quantize: QuantizeFn,
        dots: &[(DType, DotFn)],
    ) -> Self {
        QuantKernels {
            name,
            quantize,
            ..base
        }
        .with_dots(dots)
    }

    /// This table with the dot products of the given formats replaced.
    pub(crate) fn with_dots(mut self, dots: &[(DType, DotFn)]) -> Self {
        for &(dtype, dot) in dots {
            if let Some(i) = FORMATS.iter().position(|&d| d == dtype) {
                self = self.with(i, dot);
            }
        }
        self
    }
}
