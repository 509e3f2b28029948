//! Packing: copies a block of a strided operand into micro-panels the micro-kernel reads
//! with unit stride, converting F16/BF16 to f32 on the way.
//!
//! A block of `inner × kc` values (A: `mc` rows by `kc`; B: `nc` columns by `kc`) becomes
//! `inner.div_ceil(width)` panels of `kc × width` values: panel `q` holds, for each `p` in `0..kc`,
//! the `width` values of inner indices `q*width .. q*width + width` at depth `p`, zero-padded past
//! `inner`. Transposed and strided views are packed in place of being copied whole: the
//! loop reads along whichever direction is contiguous.

use super::operand::{MatRef, Values};

/// The deepest `kc` the packing scratch supports.
pub(crate) const KC_MAX: usize = 512;

/// Packs `inner × kc` values of `src` (inner index `i`, depth `p` at element
/// `i * inner_stride + p * k_stride` of `src`) into `width`-wide panels in `dst`.
pub(crate) fn pack_panels(
    src: MatRef<'_>,
    width: usize,
    inner: usize,
    inner_stride: usize,
    kc: usize,
    k_stride: usize,
    dst: &mut [f32],
) {
    debug_assert!(kc <= KC_MAX);
    if let Values::F32(v) = src.values {
        pack_f32(v, src.offset, width, inner, inner_stride, kc, k_stride, dst);
        return;
    }
    let panels = inner.div_ceil(width);
    let mut run = [0f32; KC_MAX];
    for (q, out) in dst[..panels * kc * width]
        .chunks_exact_mut(kc * width)
        .enumerate()
    {
        let start = q * width;
        let w = (inner - start).min(width);
        if inner_stride == 1 || k_stride != 1 {
            // Contiguous (or equally strided) along the panel width: one run per depth.
            for (p, slot) in out.chunks_exact_mut(width).enumerate() {
                src.load_run(
                    start * inner_stride + p * k_stride,
                    inner_stride,
                    &mut slot[..w],
                );
                slot[w..].fill(0.0);
            }
        } else {
            // Contiguous along the depth (a transposed view): one run per inner index,
            // scattered `width` apart.
            let run = &mut run[..kc];
            for ii in 0..w {
                src.load_run((start + ii) * inner_stride, 1, run);
                for (p, &v) in run.iter().enumerate() {
                    out[p * width + ii] = v;
                }
            }
            if w < width {
                for slot in out.chunks_exact_mut(width) {
                    slot[w..].fill(0.0);
                }
            }
        }
    }
}

/// [`pack_panels`] for f32 values: plain copies, no conversion.
#[allow(clippy::too_many_arguments)]
fn pack_f32(
    v: &[f32],
    offset: usize,
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
        let start = offset + q * width * inner_stride;
        let w = (inner - q * width).min(width);
        if inner_stride == 1 {
            for (p, slot) in out.chunks_exact_mut(width).enumerate() {
                let at = start + p * k_stride;
                slot[..w].copy_from_slice(&v[at..at + w]);
                slot[w..].fill(0.0);
            }
        } else if k_stride == 1 {
            for ii in 0..w {
                let row = &v[start + ii * inner_stride..start + ii * inner_stride + kc];
                for (slot, &x) in out.chunks_exact_mut(width).zip(row) {
                    slot[ii] = x;
                }
            }
            if w < width {
                for slot in out.chunks_exact_mut(width) {
                    slot[w..].fill(0.0);
                }
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
