//! Packing: copies a block of a strided operand into micro-panels the micro-kernel reads
//! with unit stride, converting F16/BF16 to f32 on the way.
//!
//! A block of `inner × kc` values (A: `mc` rows by `kc`; B: `nc` columns by `kc`) becomes
//! `inner.div_ceil(width)` panels of `kc × width` values: panel `q` holds, for each `p` in `0..kc`,
//! the `width` values of inner indices `q*width .. q*width + width` at depth `p`, zero-padded past
//! `inner`. Transposed and strided views are packed in place of being copied whole: the
//! loop reads along whichever direction is contiguous.

use half::f16;

use super::operand::{MatRef, Values};
use crate::prefetch::prefetch;

/// The deepest `kc` the packing scratch supports.
pub(crate) const KC_MAX: usize = 512;

/// How many depth steps ahead a row-by-row pack asks for the next source line.
const PREFETCH_STEPS: usize = 8;

/// The widest panel a kernel packs (the AVX2 kernel's 16 columns).
pub(crate) const MAX_WIDTH: usize = 16;

/// Packs sixteen depth runs into a 16-wide panel (contract: `pack_avx2::transpose16`).
pub(crate) type Transpose16Fn = unsafe fn(*const f32, usize, usize, *mut f32);

/// Converts one run of halves (contract: `pack_avx2::f16_to_f32`).
pub(crate) type F16RunFn = unsafe fn(&[f16], &mut [f32]);

/// Dequantizes whole blocks (contract: `dequant::dequantize_blocks_avx2`).
pub(crate) type DequantizeFn = unsafe fn(tempra_tensor::DType, &[u8], &mut [f32]);

/// ISA-specific packing helpers; `None` takes the portable loops. Only built with `Some`
/// after run-time detection of the features the helpers need.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PackOps {
    /// The panel transpose, if this ISA has one.
    pub(crate) transpose16: Option<Transpose16Fn>,
    /// The half-run conversion, if this ISA has one.
    pub(crate) f16_to_f32: Option<F16RunFn>,
    /// The block dequantization, if this ISA has its own build of it.
    pub(crate) dequantize: Option<DequantizeFn>,
}

/// Packs `inner × kc` values of `src` (inner index `i`, depth `p` at element
/// `i * inner_stride + p * k_stride` of `src`) into `width`-wide panels in `dst`.
pub(crate) fn pack_panels(
    ops: PackOps,
    src: MatRef<'_>,
    width: usize,
    inner: usize,
    inner_stride: usize,
    kc: usize,
    k_stride: usize,
    dst: &mut [f32],
) {
    debug_assert!(kc <= KC_MAX && width <= MAX_WIDTH);
    if let Values::F32(v) = src.values {
        pack_f32(ops, src, v, width, inner, inner_stride, kc, k_stride, dst);
        return;
    }
    let panels = dst[..inner.div_ceil(width) * kc * width].chunks_exact_mut(kc * width);
    if inner_stride == 1 || k_stride != 1 {
        // Contiguous (or equally strided) along the panel width: one run per depth.
        for (q, out) in panels.enumerate() {
            let start = q * width;
            let w = (inner - start).min(width);
            for (p, slot) in out.chunks_exact_mut(width).enumerate() {
                src.load_run(
                    ops,
                    start * inner_stride + p * k_stride,
                    inner_stride,
                    &mut slot[..w],
                );
                slot[w..].fill(0.0);
            }
        }
        return;
    }
    // Contiguous along the depth (a transposed view, e.g. a weight `[N, K]` as `B = wᵀ`):
    // one run per inner index, converted into `runs`, then transposed into the panel.
    let mut runs = [0f32; KC_MAX * MAX_WIDTH];
    for (q, out) in panels.enumerate() {
        let start = q * width;
        let w = (inner - start).min(width);
        // The next panel's runs, while this one is converted.
        for ii in 0..(inner - start - w).min(width) {
            src.prefetch_run((start + w + ii) * inner_stride, kc);
        }
        for ii in 0..w {
            let run = &mut runs[ii * kc..(ii + 1) * kc];
            src.load_run(ops, (start + ii) * inner_stride, 1, run);
        }
        transpose_runs(ops, &runs[..w * kc], kc, w, kc, width, out);
    }
}

/// Writes `w` runs of `kc` values (run `i` is `src[i * stride..][..kc]`) as a `kc × width`
/// panel: `out[p * width + i] = src[i * stride + p]`, zero past column `w`.
fn transpose_runs(
    ops: PackOps,
    src: &[f32],
    stride: usize,
    w: usize,
    kc: usize,
    width: usize,
    out: &mut [f32],
) {
    assert!(
        out.len() >= kc * width && w <= width && (w == 0 || (w - 1) * stride + kc <= src.len()),
        "panel too small for its runs, or runs past their source"
    );
    if let Some(transpose16) = ops.transpose16
        && w == 16
        && width == 16
    {
        // SAFETY: `ops` holds the helper only where its features were detected; the 16
        // runs of `kc` lie in `src` (asserted above), the `kc × 16` panel in `out`.
        unsafe { transpose16(src.as_ptr(), stride, kc, out.as_mut_ptr()) };
        return;
    }
    for ii in 0..w {
        let run = &src[ii * stride..ii * stride + kc];
        for (p, &v) in run.iter().enumerate() {
            out[p * width + ii] = v;
        }
    }
    if w < width {
        for slot in out[..kc * width].chunks_exact_mut(width) {
            slot[w..].fill(0.0);
        }
    }
}

/// [`pack_panels`] for f32 values: plain copies, no conversion.
#[allow(clippy::too_many_arguments)]
fn pack_f32(
    ops: PackOps,
    src: MatRef<'_>,
    v: &[f32],
    width: usize,
    inner: usize,
    inner_stride: usize,
    kc: usize,
    k_stride: usize,
    dst: &mut [f32],
) {
    let panels = inner.div_ceil(width);
    for (q, out) in dst[..panels * kc * width]
        .chunks_exact_mut(kc * width)
        .enumerate()
    {
        let start = src.offset + q * width * inner_stride;
        let w = (inner - q * width).min(width);
        if inner_stride == 1 {
            for (p, slot) in out.chunks_exact_mut(width).enumerate() {
                let at = start + p * k_stride;
                prefetch(v, at + PREFETCH_STEPS * k_stride);
                slot[..w].copy_from_slice(&v[at..at + w]);
                slot[w..].fill(0.0);
            }
        } else if k_stride == 1 {
            // The next panel's runs, while this one is packed.
            let next = (q + 1) * width;
            for ii in 0..inner.saturating_sub(next).min(width) {
                src.prefetch_run((next + ii) * inner_stride, kc);
            }
            transpose_runs(ops, &v[start..], inner_stride, w, kc, width, out);
        } else {
            for (p, slot) in out.chunks_exact_mut(width).enumerate() {
                for (ii, x) in slot[..w].iter_mut().enumerate() {
                    *x = v[start + p * k_stride + ii * inner_stride];
                }
                slot[w..].fill(0.0);
            }
        }
    }
}
