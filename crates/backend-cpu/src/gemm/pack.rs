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

/// Packs depth runs into a panel of the helper's width, prefetching the next panel's runs
/// (contract: `pack_avx2::transpose16`, `pack_avx2::transpose6`).
pub(crate) type TransposeFn = unsafe fn(*const f32, usize, usize, *mut f32, usize);

/// [`TransposeFn`] from runs of halves (contract: `pack_avx2::transpose16_f16`).
pub(crate) type TransposeF16Fn = unsafe fn(*const f16, usize, usize, *mut f32, usize);

/// Full 16-wide panels from halves contiguous along the width (contract:
/// `pack_avx2::rows16_f16`).
pub(crate) type Rows16F16Fn = unsafe fn(*const f16, usize, usize, usize, *mut f32);

/// Converts one run of halves (contract: `pack_avx2::f16_to_f32`).
pub(crate) type F16RunFn = unsafe fn(&[f16], &mut [f32]);

/// Dequantizes whole blocks (contract: `dequant::dequantize_blocks_avx2`).
pub(crate) type DequantizeFn = unsafe fn(tempra_tensor::DType, &[u8], &mut [f32]);

/// ISA-specific packing helpers; `None` takes the portable loops. Only built with `Some`
/// after run-time detection of the features the helpers need.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PackOps {
    /// The 16-wide panel transpose (B panels), if this ISA has one.
    pub(crate) transpose16: Option<TransposeFn>,
    /// The 16-wide panel transpose from halves, converting on the way.
    pub(crate) transpose16_f16: Option<TransposeF16Fn>,
    /// The 6-wide panel transpose (the AVX2 kernel's A panels).
    pub(crate) transpose6: Option<TransposeFn>,
    /// Full 16-wide panels from halves contiguous along the width.
    pub(crate) rows16_f16: Option<Rows16F16Fn>,
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
    let panels_len = inner.div_ceil(width) * kc * width;
    if inner_stride == 1 || k_stride != 1 {
        // Contiguous (or equally strided) along the panel width: one run per depth; full
        // panels of halves converted all at once where the ISA has a helper.
        let first_panel = rows16_fast(ops, src, width, inner, inner_stride, kc, k_stride, dst);
        let panels = dst[..panels_len].chunks_exact_mut(kc * width);
        for (q, out) in panels.enumerate().skip(first_panel) {
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
    // one run per inner index, converted into `runs`, then transposed into the panel
    // (halves into a full 16-wide panel: converted and transposed in registers).
    let panels = dst[..panels_len].chunks_exact_mut(kc * width);
    let mut runs = [0f32; KC_MAX * MAX_WIDTH];
    for (q, out) in panels.enumerate() {
        let start = q * width;
        let w = (inner - start).min(width);
        let next = (inner - start - w).min(width);
        if let (Values::F16(h), Some(transpose)) = (src.values, ops.transpose16_f16)
            && w == 16
            && width == 16
        {
            let first = src.offset + start * inner_stride;
            assert!(
                first + 15 * inner_stride + kc <= h.len() && out.len() >= 16 * kc,
                "f16 runs past their source, or panel too small"
            );
            // SAFETY: `ops` holds the helper only where its features were detected; the
            // 16 runs of `kc` halves lie in `h` and the `kc × 16` panel in `out`
            // (asserted above); the next panel's runs exist (`next` counts them).
            unsafe {
                transpose(
                    h.as_ptr().add(first),
                    inner_stride,
                    kc,
                    out.as_mut_ptr(),
                    next,
                )
            };
            continue;
        }
        // The next panel's runs, while this one is converted.
        for ii in 0..next {
            src.prefetch_run((start + w + ii) * inner_stride, kc);
        }
        for ii in 0..w {
            let run = &mut runs[ii * kc..(ii + 1) * kc];
            src.load_run(ops, (start + ii) * inner_stride, 1, run);
        }
        if !transpose_fast(ops, &runs[..w * kc], kc, w, kc, width, out, 0) {
            transpose_runs(&runs[..w * kc], kc, w, kc, width, out);
        }
    }
}

/// Packs the full 16-wide panels of halves contiguous along the width (`inner_stride ==
/// 1`) through the ISA's helper, if `ops` has one; returns how many panels it packed
/// (the caller packs the rest).
fn rows16_fast(
    ops: PackOps,
    src: MatRef<'_>,
    width: usize,
    inner: usize,
    inner_stride: usize,
    kc: usize,
    k_stride: usize,
    dst: &mut [f32],
) -> usize {
    let (Values::F16(h), Some(rows16), 1, 16) = (src.values, ops.rows16_f16, inner_stride, width)
    else {
        return 0;
    };
    let full = inner / 16;
    if full == 0 || kc == 0 {
        return 0;
    }
    let end = src.offset + (kc - 1) * k_stride + 16 * full;
    let out = &mut dst[..full * 16 * kc];
    assert!(end <= h.len(), "f16 rows past their source");
    // SAFETY: `ops` holds the helper only where its features were detected; every depth's
    // `16 · full` halves lie in `h` (the last depth's end at `end`, asserted) and the
    // `full` panels in `out`.
    unsafe {
        rows16(
            h.as_ptr().add(src.offset),
            k_stride,
            full,
            kc,
            out.as_mut_ptr(),
        )
    };
    full
}

/// [`transpose_runs`] through the ISA's register transpose where `ops` has one for a
/// panel of `w == width` runs, prefetching the `next` runs after them (`stride` apart).
/// Returns whether it packed the panel.
fn transpose_fast(
    ops: PackOps,
    src: &[f32],
    stride: usize,
    w: usize,
    kc: usize,
    width: usize,
    out: &mut [f32],
    next: usize,
) -> bool {
    let helper = match (w, width) {
        (16, 16) => ops.transpose16,
        (6, 6) => ops.transpose6,
        _ => None,
    };
    let Some(transpose) = helper else {
        return false;
    };
    assert!(
        out.len() >= kc * width && (w - 1) * stride + kc <= src.len(),
        "panel too small for its runs, or runs past their source"
    );
    // SAFETY: `ops` holds the helper only where its features were detected; the `w` runs
    // of `kc` lie in `src` (asserted above), the `kc × width` panel in `out`; the next
    // runs are only prefetched.
    unsafe { transpose(src.as_ptr(), stride, kc, out.as_mut_ptr(), next) };
    true
}

/// Writes `w` runs of `kc` values (run `i` is `src[i * stride..][..kc]`) as a `kc × width`
/// panel: `out[p * width + i] = src[i * stride + p]`, zero past column `w`.
fn transpose_runs(src: &[f32], stride: usize, w: usize, kc: usize, width: usize, out: &mut [f32]) {
    assert!(
        out.len() >= kc * width && w <= width && (w == 0 || (w - 1) * stride + kc <= src.len()),
        "panel too small for its runs, or runs past their source"
    );
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
            let next_start = (q + 1) * width;
            let next = inner.saturating_sub(next_start).min(width);
            if !transpose_fast(ops, &v[start..], inner_stride, w, kc, width, out, next) {
                // The next panel's runs, while this one is packed.
                for ii in 0..next {
                    src.prefetch_run((next_start + ii) * inner_stride, kc);
                }
                transpose_runs(&v[start..], inner_stride, w, kc, width, out);
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way a panel can be packed from depth-contiguous runs (A of the AVX2 kernel:
    /// 6 wide; B: 16 wide; f32 and f16 sources; partial panels; depths off the 8-step
    /// of the register transposes) packs the same values with the ISA's helpers as with
    /// the portable loops, bit for bit.
    #[test]
    fn register_transposes_pack_what_the_portable_loops_pack() {
        let Some(kernel) = crate::gemm::avx2_kernel() else {
            eprintln!("skipped: no AVX2+FMA+F16C on this CPU");
            return;
        };
        let fast = kernel.pack;
        let (offset, stride) = (3, 300);
        let values: Vec<f32> = (0..offset + 260 * stride)
            .map(|i| ((i * 7919) % 1013) as f32 / 97.0 - 5.0)
            .collect();
        let halves: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
        for width in [6usize, 16] {
            for inner in [1usize, 5, 6, 7, 12, 16, 17, 33] {
                for kc in [1, 7, 8, 9, 16, 17, 64, 255, 256] {
                    let sources = [Values::F32(&values), Values::F16(&halves)];
                    // Depth-contiguous runs (transposed), and rows contiguous along the
                    // panel width (one row per depth).
                    let layouts = [(stride, 1), (1, stride)];
                    for (src, (inner_stride, k_stride)) in
                        sources.into_iter().flat_map(|s| layouts.map(|l| (s, l)))
                    {
                        let m = MatRef {
                            values: src,
                            offset,
                            rs: stride,
                            cs: 1,
                        };
                        let len = inner.div_ceil(width) * kc * width;
                        // A sentinel past the panels: no helper writes beyond them.
                        let (mut want, mut got) = (vec![7.5f32; len + 8], vec![-7.5f32; len + 8]);
                        let portable = PackOps::default();
                        let (is, ks) = (inner_stride, k_stride);
                        pack_panels(portable, m, width, inner, is, kc, ks, &mut want);
                        pack_panels(fast, m, width, inner, is, kc, ks, &mut got);
                        let dtype = match src {
                            Values::F32(_) => "f32",
                            _ => "f16",
                        };
                        let case = format!(
                            "width {width}, inner {inner}, kc {kc}, strides {is}/{ks}, {dtype}"
                        );
                        assert_eq!(got[..len], want[..len], "{case}");
                        assert!(
                            got[len..].iter().all(|&x| x == -7.5),
                            "{case}: wrote past the panels"
                        );
                    }
                }
            }
        }
    }
}
