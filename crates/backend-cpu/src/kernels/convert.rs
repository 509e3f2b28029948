//! Dtype conversion of contiguous rows: f16/bf16 → f32 (exact) and f32 → f16/bf16
//! (round to nearest even), bit-exact with `half` and the reference backend.

use half::{bf16, f16};

use crate::simd::{Lane, Simd, simd_dispatch};

/// `dst[i] = src[i] as f32` for a row of f32, f16 or bf16.
#[inline(always)]
fn widen_row<S: Simd, L: Lane>(s: S, src: &[L], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let mut sc = src.chunks_exact(S::LANES);
    let mut dc = dst.chunks_exact_mut(S::LANES);
    for (sv, dv) in (&mut sc).zip(&mut dc) {
        s.store(dv, L::load(s, sv));
    }
    for (v, d) in sc.remainder().iter().zip(dc.into_remainder()) {
        *d = v.to_f32();
    }
}

/// `dst[i] = f16(src[i])`.
#[inline(always)]
fn narrow_f16_row<S: Simd>(s: S, src: &[f32], dst: &mut [f16]) {
    let n = src.len().min(dst.len());
    let dst: &mut [u16] = bytemuck::cast_slice_mut(&mut dst[..n]);
    let src = &src[..n];
    let mut sc = src.chunks_exact(S::LANES);
    let mut dc = dst.chunks_exact_mut(S::LANES);
    for (sv, dv) in (&mut sc).zip(&mut dc) {
        s.store_f16(dv, s.load(sv));
    }
    for (v, d) in sc.remainder().iter().zip(dc.into_remainder()) {
        *d = f16::from_f32(*v).to_bits();
    }
}

/// `dst[i] = bf16(src[i])`.
#[inline(always)]
fn narrow_bf16_row<S: Simd>(s: S, src: &[f32], dst: &mut [bf16]) {
    let n = src.len().min(dst.len());
    let dst: &mut [u16] = bytemuck::cast_slice_mut(&mut dst[..n]);
    let src = &src[..n];
    let mut sc = src.chunks_exact(S::LANES);
    let mut dc = dst.chunks_exact_mut(S::LANES);
    for (sv, dv) in (&mut sc).zip(&mut dc) {
        s.store_bf16(dv, s.load(sv));
    }
    for (v, d) in sc.remainder().iter().zip(dc.into_remainder()) {
        *d = crate::scalar::f32_to_bf16_bits(*v);
    }
}

#[inline(always)]
fn widen_f16_row<S: Simd>(s: S, src: &[f16], dst: &mut [f32]) {
    widen_row(s, src, dst)
}

#[inline(always)]
fn widen_bf16_row<S: Simd>(s: S, src: &[bf16], dst: &mut [f32]) {
    widen_row(s, src, dst)
}

simd_dispatch! {
    /// f16 → f32 over a contiguous row.
    pub(crate) fn f16_to_f32(src: &[f16], dst: &mut [f32]) -> () = widen_f16_row;
    /// bf16 → f32 over a contiguous row.
    pub(crate) fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) -> () = widen_bf16_row;
    /// f32 → f16 over a contiguous row.
    pub(crate) fn f32_to_f16(src: &[f32], dst: &mut [f16]) -> () = narrow_f16_row;
    /// f32 → bf16 over a contiguous row.
    pub(crate) fn f32_to_bf16(src: &[f32], dst: &mut [bf16]) -> () = narrow_bf16_row;
}
