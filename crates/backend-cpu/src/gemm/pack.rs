//! Packing: copies a block of a strided operand into micro-panels the micro-kernel reads
//! with unit stride, converting F16/BF16 to f32 on the way.
//!
//! A block of `inner × kc` values (A: `mc` rows by `kc`; B: `nc` columns by `kc`) becomes
//! `inner.div_ceil(width)` panels of `kc × width` values: panel `q` holds, for each `p` in `0..kc`,
//! the `width` values of inner indices `q*width .. q*width + width` at depth `p`, zero-padded past
//! `inner`. Transposed and strided views are packed in place of being copied whole: the
//! loop reads along whichever direction is contiguous.

use super::operand::MatRef;

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
    let panels = inner.div_ceil(width);
    let mut run = [0f32; KC_MAX];
    for (q, out) in dst[..panels * kc * width].chunks_exact_mut(kc * width).enumerate() {
        let start = q * width;
        let w = (inner - start).min(width);
        if inner_stride == 1 || k_stride != 1 {
            // Contiguous (or equally strided) along the panel width: one run per depth.
            for (p, slot) in out.chunks_exact_mut(width).enumerate() {
                src.load_run(start * inner_stride + p * k_stride, inner_stride, &mut slot[..w]);
                slot[w..].fill(0.0);
            }
        } else {
            // Contiguous along the depth (a transposed view): one run per inner index,
            // scattered width apart.
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
