//! The table of quantized kernels for one ISA: the activation quantizer and one dot
//! product per weight format.

use tempra_tensor::quant::{self, QuantDot};
use tempra_tensor::{DType, Result, TensorError};

use crate::interleaved::InterleavedLayout;
use crate::isa::Level;

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
/// group (an [`InterleavedLayout`]) at `w`, `nb` records long, and `acts.len()` (1 up to
/// its [`GroupKernel::rows`])
/// activation rows of the format's partner ([`quant::vec_dot_dtype`]): Q8_0 for Q4_0R8,
/// Q8_0R8, Iq4NlR8 and Mxfp4R8, Q8_K for Q4KR8, Q5KR8, Q6KR8, Iq4XsR8, Tq1_0R8 and Tq2_0R8.
///
/// Safety contract of every `GemmR8Fn`: the CPU has the features the table was built
/// for; `w` points to `nb` readable records of the group (any alignment);
/// `1 <= acts.len() <= rows` (the kernel's [`GroupKernel::rows`]) and
/// `out.len() == acts.len()`; and each `acts[r]`, by the
/// group's dtype:
///
/// - Q4_0R8, Q8_0R8, Iq4NlR8, Mxfp4R8: `blocks` points to `nb` readable Q8_0 blocks (any
///   alignment), `scales` to `nb` readable, aligned f32s (block `b`'s scale `d` as f32) and
///   `sums` to `nb` readable, aligned i32s (block `b`'s `Σ qs`);
/// - Q4KR8, Q5KR8, Q6KR8, Iq4XsR8, Tq1_0R8, Tq2_0R8: `blocks` points to `nb` readable Q8_K
///   blocks (any alignment), which carry their own scales and 16-value sums; `scales` and
///   `sums` are not read and may hold any value (`linear` passes null, or for its first row
///   an empty slice's dangling pointer; the tests pass null; the probe passes zeroed
///   buffers).
pub(crate) type GemmR8Fn = unsafe fn(usize, *const u8, &[ActRow], &mut [[f32; 8]]);

/// A group product with the most activation rows it takes per call (its register tile:
/// 4, or 8 for the products whose 512-bit registers hold eight rows).
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupKernel {
    /// The product.
    pub(crate) product: GemmR8Fn,
    /// The most activation rows per call (at most [`MAX_GROUP_ROWS`]).
    pub(crate) rows: usize,
}

/// The most activation rows any [`GroupKernel`] takes per call.
pub(crate) const MAX_GROUP_ROWS: usize = 8;

/// Quantizes f32 values (whole blocks) into blocks of the given activation dtype; for
/// Q8_0 with [`BlockStats`], also each block's scale and `Σ qs`.
pub(crate) type QuantizeFn = fn(DType, &[f32], &mut [u8], Option<BlockStats<'_>>) -> Result<()>;

/// Where a Q8_0 quantizer writes each block's scale (its f16 `d` as f32) and the sum of
/// its 32 quants, one entry per block: what the eight-row kernels read beside the blocks.
#[derive(Debug)]
pub(crate) struct BlockStats<'a> {
    /// Each block's scale.
    pub(crate) scales: &'a mut [f32],
    /// Each block's `Σ qs`.
    pub(crate) sums: &'a mut [i32],
}

/// The portable quantizer: the reference's blocks, then the stats read back from them.
pub(crate) fn quantize_portable(
    dtype: DType,
    src: &[f32],
    dst: &mut [u8],
    stats: Option<BlockStats<'_>>,
) -> Result<()> {
    stats_fit(dtype, src.len(), stats.as_ref())?;
    quant::quantize_row(dtype, src, dst)?;
    if let Some(stats) = stats {
        super::acts::q8_0_block_stats(dst, stats.scales, stats.sums);
    }
    Ok(())
}

/// Checks that `stats`, if any, go with Q8_0 and hold an entry per block of `values`.
pub(crate) fn stats_fit(dtype: DType, values: usize, stats: Option<&BlockStats<'_>>) -> Result<()> {
    let Some(stats) = stats else { return Ok(()) };
    let blocks = values / dtype.block_len();
    if dtype != DType::Q8_0 || stats.scales.len() != blocks || stats.sums.len() != blocks {
        return Err(TensorError::Argument {
            op: "quantize",
            name: "stats",
            reason: format!(
                "block stats are for Q8_0 rows, one entry per block ({dtype}, {blocks} blocks, {} scales, {} sums)",
                stats.scales.len(),
                stats.sums.len()
            ),
        });
    }
    Ok(())
}

/// Kernels for one ISA.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QuantKernels {
    /// Name for benchmarks and test messages.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: &'static str,
    /// The activation quantizer.
    pub(crate) quantize: QuantizeFn,
    dots: [Option<DotFn>; FORMATS.len()],
    interleaved: [GroupKernel; InterleavedLayout::ALL.len()],
}

/// The weight formats, in table order: the legacy and K formats, then
/// [`quant::I_QUANTS`], then MXFP4.
pub(crate) const FORMATS: [DType; 22] = {
    let legacy_and_k = [
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
    let mut formats = [DType::MXFP4; 22];
    let mut i = 0;
    while i < formats.len() - 1 {
        formats[i] = if i < legacy_and_k.len() {
            legacy_and_k[i]
        } else {
            quant::I_QUANTS[i - legacy_and_k.len()]
        };
        i += 1;
    }
    formats
};

impl QuantKernels {
    /// A table of an ISA's kernels: `dots` in [`FORMATS`] order, `interleaved` in
    /// [`InterleavedLayout::ALL`] order.
    pub(crate) fn new(
        name: &'static str,
        quantize: QuantizeFn,
        dots: [DotFn; FORMATS.len()],
        interleaved: [GroupKernel; InterleavedLayout::ALL.len()],
    ) -> Self {
        QuantKernels {
            name,
            quantize,
            dots: dots.map(Some),
            interleaved,
        }
    }

    /// The dot product for weights of `dtype`, if it is a weight format.
    pub(crate) fn dot(&self, dtype: DType) -> Option<DotFn> {
        FORMATS
            .iter()
            .position(|&d| d == dtype)
            .and_then(|i| self.dots[i])
    }

    /// The product for one group of `layout` (every table has one).
    pub(crate) fn gemm_r8(&self, layout: InterleavedLayout) -> GroupKernel {
        self.interleaved[layout.index()]
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
/// to its format and dotted by [`quant::vec_dot`], accumulated per block in f32 as the
/// reference does.
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
    let Some(layout) = InterleavedLayout::of(W::DTYPE) else {
        return;
    };
    let record = layout.record_bytes();
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
                layout.get_block(r, rec, &mut block[..bb]);
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
    quantize: quantize_portable,
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
        Some(scalar_dot::<quant::BlockIQ4NL>),
        Some(scalar_dot::<quant::BlockIQ4XS>),
        Some(scalar_dot::<quant::BlockIQ3S>),
        Some(scalar_dot::<quant::BlockIQ3XXS>),
        Some(scalar_dot::<quant::BlockIQ2S>),
        Some(scalar_dot::<quant::BlockIQ2XS>),
        Some(scalar_dot::<quant::BlockIQ2XXS>),
        Some(scalar_dot::<quant::BlockIQ1S>),
        Some(scalar_dot::<quant::BlockIQ1M>),
        Some(scalar_dot::<quant::BlockTQ1_0>),
        Some(scalar_dot::<quant::BlockTQ2_0>),
        Some(scalar_dot::<quant::BlockMXFP4>),
    ],
    interleaved: [
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockQ4_0>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockQ8_0>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockQ4K>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockQ5K>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockQ6K>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockIQ4NL>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockIQ4XS>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockMXFP4>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockTQ1_0>,
            rows: MAX_GROUP_ROWS,
        },
        GroupKernel {
            product: scalar_gemm_r8::<quant::BlockTQ2_0>,
            rows: MAX_GROUP_ROWS,
        },
    ],
};

/// The table for the backend's dispatch `level`: the x86 kernels from the AVX2 level up
/// (see `x86::table_for`), `None` at the scalar level (the caller takes [`SCALAR`]).
pub(crate) fn for_level(level: Level) -> Option<QuantKernels> {
    #[cfg(target_arch = "x86_64")]
    {
        super::x86::table_for(level)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = level;
        None
    }
}

/// Every table this CPU runs (the tests compare each with the reference).
#[cfg(test)]
pub(crate) fn available_kernels() -> Vec<QuantKernels> {
    let mut tables = vec![SCALAR];
    #[cfg(target_arch = "x86_64")]
    tables.extend(super::x86::available_tables());
    tables
}
