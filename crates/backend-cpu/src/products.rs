//! What the product ops (`matmul`, `linear`) need from the backend, gathered per call:
//! the kernels for the backend's ISA level, the scratch pool and the worker pool.

use crate::backend::CpuBackend;
use crate::gemm::{self, Gemm};
use crate::interleaved::InterleavedLayout;
use crate::isa::Level;
use crate::quantized::{self, QuantKernels};

/// With [`crate::CpuConfig::fast_prefill`], from this many rows on quantized `linear`
/// runs as dequantize-while-packing plus the f32 GEMM (faster on AVX2 without VNNI, but
/// not the integer arithmetic of fewer rows).
const DEQUANT_GEMM_ROWS: usize = 32;

/// With [`crate::CpuConfig::fast_prefill`], from this many rows on float `linear` runs
/// the blocked f32 GEMM (its sums run in another order than decode's dot products).
const FLOAT_GEMM_ROWS: usize = 2;

/// The settings of one product call.
#[derive(Clone, Copy)]
pub(crate) struct Products<'a> {
    /// The f32 GEMM (kernel, scratch pool, workers).
    pub(crate) gemm: Gemm<'a>,
    /// The quantized dot products and activation quantizer.
    pub(crate) quant: QuantKernels,
    /// Whether the AVX2 (+FMA, F16C) float kernels may run (the GEMV).
    pub(crate) avx2: bool,
    /// From this many input rows on, quantized weights are dequantized while packing
    /// for the f32 GEMM instead of running the integer dot products (`usize::MAX`, never,
    /// unless the backend allows a fast prefill).
    pub(crate) dequant_gemm_rows: usize,
    /// From this many input rows on, float weights run the blocked f32 GEMM instead of
    /// the dot form of decode (`usize::MAX`, never, unless the backend allows a fast
    /// prefill).
    pub(crate) float_gemm_rows: usize,
    /// The backend's ISA level (the float dot products dispatch on it).
    pub(crate) level: Level,
}

impl CpuBackend {
    /// The product settings for this backend's ISA level: the GEMM micro-kernel of the
    /// level (16×16 on AVX-512, 6×16 on AVX2); the quantized dot products are the AVX2
    /// ones from the AVX2 level up, with `vpdpbusd` where the CPU has VNNI (the AVX-512
    /// encoding only at the AVX-512 level).
    pub(crate) fn products(&self) -> Products<'_> {
        // The float and quantized kernels go together: both AVX2 or both portable, as
        // the dispatch level says.
        let quant_table = quantized::for_level(self.level());
        let (kernel, quant, avx2) = match quant_table {
            Some(quant) => (gemm::kernel_for(self.level()), quant, true),
            None => (gemm::SCALAR, quantized::SCALAR, false),
        };
        Products {
            gemm: Gemm {
                kernel,
                pool: self.pool(),
                par: &**self.workers(),
            },
            quant,
            avx2,
            dequant_gemm_rows: if self.fast_prefill() {
                DEQUANT_GEMM_ROWS
            } else {
                usize::MAX
            },
            float_gemm_rows: if self.fast_prefill() {
                FLOAT_GEMM_ROWS
            } else {
                usize::MAX
            },
            level: if avx2 { self.level() } else { Level::scalar() },
        }
    }
}

impl Products<'_> {
    /// Whether `linear` over weights prepared in `layout` runs the integer products at
    /// every row count (Q4_0, Q4_K, Q5_K, IQ4_NL, IQ4_XS, MXFP4, TQ1_0 and TQ2_0), rather
    /// than the dequantizing f32 GEMM from [`Products::dequant_gemm_rows`] rows on. Q8_0
    /// prefill is faster dequantized than through the VNNI product, whose horizontal sums
    /// per block column saturate the shuffle port at four rows; Q4_0 and Q4_K unpack twice
    /// the values per byte and are faster as integers (see `docs/perf-log.md`). Q6_K's
    /// four-row product is no faster than the dequantizing GEMM at prefill sizes
    /// (`prefill_int8_vs_dequantized_gemm`); Q5_K's is, and Q5_K_M prefill gains from it.
    pub(crate) fn integer_prefill(&self, layout: InterleavedLayout) -> bool {
        matches!(
            layout,
            InterleavedLayout::Q4_0R8
                | InterleavedLayout::Q4KR8
                | InterleavedLayout::Q5KR8
                | InterleavedLayout::Iq4NlR8
                | InterleavedLayout::Iq4XsR8
                | InterleavedLayout::Mxfp4R8
                | InterleavedLayout::Tq1_0R8
                | InterleavedLayout::Tq2_0R8
        )
    }
}
