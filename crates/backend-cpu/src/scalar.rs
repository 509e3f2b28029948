//! The portable one-lane [`Simd`] token: the kernels' fallback on any CPU, and the
//! specification of what each vector method does lane by lane.

use crate::simd::Simd;

/// One f32 lane, plain Rust. Always available.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Scalar;

impl Simd for Scalar {
    type V = f32;
    type M = bool;
    const LANES: usize = 1;

    #[inline(always)]
    fn splat(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn load(self, src: &[f32]) -> f32 {
        src[0]
    }
    #[inline(always)]
    fn store(self, dst: &mut [f32], v: f32) {
        dst[0] = v;
    }
    #[inline(always)]
    unsafe fn load_ptr(self, src: *const f32) -> f32 {
        // SAFETY: the caller guarantees one readable f32 (see the trait).
        unsafe { src.read_unaligned() }
    }
    #[inline(always)]
    unsafe fn load_f16_ptr(self, src: *const u16) -> f32 {
        // SAFETY: the caller guarantees one readable u16 (see the trait).
        half::f16::from_bits(unsafe { src.read_unaligned() }).to_f32()
    }
    #[inline(always)]
    fn load_f16(self, src: &[u16]) -> f32 {
        half::f16::from_bits(src[0]).to_f32()
    }
    #[inline(always)]
    fn store_f16(self, dst: &mut [u16], v: f32) {
        dst[0] = half::f16::from_f32(v).to_bits();
    }
    #[inline(always)]
    fn load_bf16(self, src: &[u16]) -> f32 {
        f32::from_bits((src[0] as u32) << 16)
    }
    #[inline(always)]
    fn store_bf16(self, dst: &mut [u16], v: f32) {
        dst[0] = f32_to_bf16_bits(v);
    }
    #[inline(always)]
    fn add(self, a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn div(self, a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        // Not `f32::mul_add`: without FMA hardware that is a slow library call.
        a * b + c
    }
    #[inline(always)]
    fn max(self, a: f32, b: f32) -> f32 {
        if a > b { a } else { b }
    }
    #[inline(always)]
    fn min(self, a: f32, b: f32) -> f32 {
        if a < b { a } else { b }
    }
    #[inline(always)]
    fn sqrt(self, a: f32) -> f32 {
        a.sqrt()
    }
    #[inline(always)]
    fn abs(self, a: f32) -> f32 {
        a.abs()
    }
    #[inline(always)]
    fn neg(self, a: f32) -> f32 {
        -a
    }
    #[inline(always)]
    fn copysign(self, a: f32, sign: f32) -> f32 {
        a.copysign(sign)
    }
    #[inline(always)]
    fn round(self, a: f32) -> f32 {
        a.round_ties_even()
    }
    #[inline(always)]
    fn floor(self, a: f32) -> f32 {
        a.floor()
    }
    #[inline(always)]
    fn pow2i(self, n: f32) -> f32 {
        f32::from_bits(((n as i32 + 127) as u32) << 23)
    }
    #[inline(always)]
    fn frexp(self, a: f32) -> (f32, f32) {
        let bits = a.to_bits();
        let m = f32::from_bits((bits & 0x807f_ffff) | 0x3f00_0000);
        let e = ((bits >> 23) & 0xff) as i32 - 126;
        (m, e as f32)
    }
    #[inline(always)]
    fn lt(self, a: f32, b: f32) -> bool {
        a < b
    }
    #[inline(always)]
    fn eq(self, a: f32, b: f32) -> bool {
        a == b
    }
    #[inline(always)]
    fn unord(self, a: f32, b: f32) -> bool {
        a.is_nan() || b.is_nan()
    }
    #[inline(always)]
    fn select(self, m: bool, a: f32, b: f32) -> f32 {
        if m { a } else { b }
    }
    #[inline(always)]
    fn first_set(self, m: bool) -> Option<usize> {
        m.then_some(0)
    }
    #[inline(always)]
    fn swap_pairs(self, a: f32) -> f32 {
        // One lane has no pair; the rope kernels never call this with `LANES == 1`.
        a
    }
    #[inline(always)]
    fn reduce_add(self, a: f32) -> f32 {
        a
    }
    #[inline(always)]
    fn reduce_max(self, a: f32) -> f32 {
        a
    }
    #[inline(always)]
    fn reduce_min(self, a: f32) -> f32 {
        a
    }
}

/// f32 → bf16 bits, round to nearest even; NaN stays a (quiet) NaN. Bit-exact with
/// `half::bf16::from_f32` and the SIMD stores.
#[inline(always)]
pub(crate) fn f32_to_bf16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    if x & 0x7fff_ffff > 0x7f80_0000 {
        return ((x >> 16) | 0x0040) as u16;
    }
    ((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_matches_half() {
        let specials = [
            0.0f32,
            -0.0,
            1.0,
            -1.5,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-40,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let sweep = (0..20_000u32).map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)));
        for v in specials.into_iter().chain(sweep) {
            if v.is_nan() {
                assert!(f32::from_bits((f32_to_bf16_bits(v) as u32) << 16).is_nan());
            } else {
                assert_eq!(
                    f32_to_bf16_bits(v),
                    half::bf16::from_f32(v).to_bits(),
                    "{v:e}"
                );
            }
        }
    }

    #[test]
    fn frexp_and_pow2() {
        let s = Scalar;
        assert_eq!(s.frexp(8.0), (0.5, 4.0));
        assert_eq!(s.frexp(0.75), (0.75, 0.0));
        assert_eq!(s.pow2i(-126.0), f32::MIN_POSITIVE);
        assert_eq!(s.pow2i(127.0), 2f32.powi(127));
    }
}
