//! The portable vector vocabulary every kernel is written in, once.
//!
//! A kernel is a generic `#[inline(always)]` function over a [`Simd`] token type:
//! [`crate::scalar::Scalar`] (one lane, any CPU), `x86::Avx2` (8 lanes) and
//! `x86::Avx512` (16 lanes). [`simd_dispatch!`] wraps a kernel into a function taking a
//! [`Level`](crate::isa::Level) that calls the kernel instantiated inside a
//! `#[target_feature]` function, so the vector code is compiled for that ISA while the
//! crate itself targets baseline x86-64. A NEON token would be one more impl beside them.
//!
//! Tokens are zero-sized and can only be made for an ISA the CPU has (see each impl), so
//! every method is safe to call. Loads and stores take slices and use their first
//! `LANES` values (they panic on a shorter slice); `*_partial` handle a tail shorter
//! than a vector.

/// One ISA's vectors of f32 and the operations the kernels use.
pub(crate) trait Simd: Copy + Send + Sync + 'static {
    /// A vector of `LANES` f32.
    type V: Copy;
    /// A lane mask from a comparison.
    type M: Copy;
    /// f32 lanes per vector.
    const LANES: usize;

    /// Every lane `x`.
    fn splat(self, x: f32) -> Self::V;
    /// The first `LANES` values of `src`.
    fn load(self, src: &[f32]) -> Self::V;
    /// Writes the vector to the first `LANES` values of `dst`.
    fn store(self, dst: &mut [f32], v: Self::V);
    /// `LANES` f32 from `src`, without a bounds check (hot attention loops).
    ///
    /// # Safety
    ///
    /// `src..src + LANES` must be readable f32s.
    unsafe fn load_ptr(self, src: *const f32) -> Self::V;
    /// `LANES` f16 (raw bits) from `src` as f32, without a bounds check.
    ///
    /// # Safety
    ///
    /// `src..src + LANES` must be readable u16s.
    unsafe fn load_f16_ptr(self, src: *const u16) -> Self::V;
    /// The first `LANES` f16 (as raw bits) of `src`, converted exactly.
    fn load_f16(self, src: &[u16]) -> Self::V;
    /// Writes the vector as f16 (round to nearest even) to the first `LANES` of `dst`.
    fn store_f16(self, dst: &mut [u16], v: Self::V);
    /// The first `LANES` bf16 (as raw bits) of `src`, converted exactly.
    fn load_bf16(self, src: &[u16]) -> Self::V;
    /// Writes the vector as bf16 (round to nearest even, NaN stays NaN) to `dst`.
    fn store_bf16(self, dst: &mut [u16], v: Self::V);

    /// `a + b`
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a - b`
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a · b`
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a / b` (correctly rounded)
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a · b + c` (fused where the ISA has FMA)
    fn mul_add(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// x86 `max`: `a > b ? a : b`, so `b` when either is NaN.
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// x86 `min`: `a < b ? a : b`, so `b` when either is NaN.
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    /// `√a` (correctly rounded)
    fn sqrt(self, a: Self::V) -> Self::V;
    /// `|a|`
    fn abs(self, a: Self::V) -> Self::V;
    /// `-a`
    fn neg(self, a: Self::V) -> Self::V;
    /// `a` with the sign of `sign`
    fn copysign(self, a: Self::V, sign: Self::V) -> Self::V;
    /// Round to the nearest integer, ties to even.
    fn round(self, a: Self::V) -> Self::V;
    /// Round toward −∞.
    fn floor(self, a: Self::V) -> Self::V;
    /// `2ⁿ` for integral `n` in `[-126, 127]`, built from exponent bits.
    fn pow2i(self, n: Self::V) -> Self::V;
    /// For finite normal `a > 0`: `(m, e)` with `a = m · 2ᵉ`, `m` in `[0.5, 1)`.
    fn frexp(self, a: Self::V) -> (Self::V, Self::V);

    /// `a < b` per lane (false on NaN).
    fn lt(self, a: Self::V, b: Self::V) -> Self::M;
    /// `a == b` per lane (false on NaN).
    fn eq(self, a: Self::V, b: Self::V) -> Self::M;
    /// Whether `a` or `b` is NaN, per lane.
    fn unord(self, a: Self::V, b: Self::V) -> Self::M;
    /// `m ? a : b` per lane.
    fn select(self, m: Self::M, a: Self::V, b: Self::V) -> Self::V;
    /// The index of the first set lane, if any.
    fn first_set(self, m: Self::M) -> Option<usize>;

    /// Swaps lanes `2i` and `2i + 1` (for interleaved rope).
    fn swap_pairs(self, a: Self::V) -> Self::V;
    /// The sum of the lanes.
    fn reduce_add(self, a: Self::V) -> f32;
    /// The largest lane (NaN lanes are not guaranteed to win).
    fn reduce_max(self, a: Self::V) -> f32;
    /// The smallest lane (NaN lanes are not guaranteed to win).
    fn reduce_min(self, a: Self::V) -> f32;

    /// The lane sums of eight vectors (a transposing reduction where the ISA has one).
    #[inline(always)]
    fn reduce_add_x8(self, v: [Self::V; 8]) -> [f32; 8] {
        v.map(|x| self.reduce_add(x))
    }

    /// The `src.len() < LANES` values of `src`, the other lanes `fill`.
    #[inline(always)]
    fn load_partial(self, src: &[f32], fill: f32) -> Self::V {
        let mut buf = [fill; 16];
        buf[..src.len()].copy_from_slice(src);
        self.load(&buf)
    }

    /// Writes the first `dst.len() < LANES` lanes to `dst`.
    #[inline(always)]
    fn store_partial(self, dst: &mut [f32], v: Self::V) {
        let mut buf = [0.0f32; 16];
        self.store(&mut buf, v);
        let n = dst.len();
        dst.copy_from_slice(&buf[..n]);
    }

    /// `max` that returns NaN when either lane is NaN (the reference semantics).
    #[inline(always)]
    fn max_nan(self, a: Self::V, b: Self::V) -> Self::V {
        let m = self.max(a, b);
        self.select(self.unord(a, b), self.add(a, b), m)
    }

    /// `min` that returns NaN when either lane is NaN (the reference semantics).
    #[inline(always)]
    fn min_nan(self, a: Self::V, b: Self::V) -> Self::V {
        let m = self.min(a, b);
        self.select(self.unord(a, b), self.add(a, b), m)
    }
}

/// Element types a kernel reads as f32 vectors: f32, f16 and bf16.
pub(crate) trait Lane: bytemuck::Pod + Send + Sync {
    /// The first `LANES` values of `src` as f32.
    fn load<S: Simd>(s: S, src: &[Self]) -> S::V;
    /// `LANES` values from `src` as f32, without a bounds check.
    ///
    /// # Safety
    ///
    /// `src..src + LANES` must be readable values.
    unsafe fn load_ptr<S: Simd>(s: S, src: *const Self) -> S::V;
    /// The `src.len() < LANES` values of `src` as f32, the other lanes `fill`.
    fn load_partial<S: Simd>(s: S, src: &[Self], fill: f32) -> S::V;
    /// One value as f32.
    fn to_f32(self) -> f32;
}

impl Lane for f32 {
    #[inline(always)]
    fn load<S: Simd>(s: S, src: &[f32]) -> S::V {
        s.load(src)
    }
    #[inline(always)]
    unsafe fn load_ptr<S: Simd>(s: S, src: *const f32) -> S::V {
        // SAFETY: forwarded contract.
        unsafe { s.load_ptr(src) }
    }
    #[inline(always)]
    fn load_partial<S: Simd>(s: S, src: &[f32], fill: f32) -> S::V {
        s.load_partial(src, fill)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

impl Lane for half::f16 {
    #[inline(always)]
    fn load<S: Simd>(s: S, src: &[half::f16]) -> S::V {
        s.load_f16(bytemuck::cast_slice(src))
    }
    #[inline(always)]
    unsafe fn load_ptr<S: Simd>(s: S, src: *const half::f16) -> S::V {
        // SAFETY: forwarded contract; f16 and u16 have the same layout.
        unsafe { s.load_f16_ptr(src.cast()) }
    }
    #[inline(always)]
    fn load_partial<S: Simd>(s: S, src: &[half::f16], fill: f32) -> S::V {
        let mut buf = [half::f16::from_f32(fill); 16];
        buf[..src.len()].copy_from_slice(src);
        s.load_f16(bytemuck::cast_slice(&buf))
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}

impl Lane for half::bf16 {
    #[inline(always)]
    fn load<S: Simd>(s: S, src: &[half::bf16]) -> S::V {
        s.load_bf16(bytemuck::cast_slice(src))
    }
    #[inline(always)]
    unsafe fn load_ptr<S: Simd>(s: S, src: *const half::bf16) -> S::V {
        // SAFETY: forwarded contract; `S::LANES` values are readable.
        s.load_bf16(unsafe { std::slice::from_raw_parts(src.cast::<u16>(), S::LANES) })
    }
    #[inline(always)]
    fn load_partial<S: Simd>(s: S, src: &[half::bf16], fill: f32) -> S::V {
        let mut buf = [half::bf16::from_f32(fill); 16];
        buf[..src.len()].copy_from_slice(src);
        s.load_bf16(bytemuck::cast_slice(&buf))
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
}

/// Defines functions taking a [`Level`](crate::isa::Level) first that run a generic
/// kernel instantiated for that level's ISA inside a `#[target_feature]` function:
///
/// ```ignore
/// simd_dispatch! {
///     /// Docs.
///     pub(crate) fn unary_f32(op: UnaryOp, x: &[f32], y: &mut [f32]) -> () = unary_row;
/// }
/// ```
///
/// defines `unary_f32(level, op, x, y)` calling `unary_row::<S>(token, op, x, y)`.
macro_rules! simd_dispatch {
    ($(
        $(#[$meta:meta])*
        $vis:vis fn $name:ident $(<$($lt:lifetime),*>)? ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty = $kernel:path;
    )*) => {$(
        $(#[$meta])*
        $vis fn $name $(<$($lt),*>)? (level: $crate::isa::Level, $($arg: $ty),*) -> $ret {
            match level.isa() {
                #[cfg(target_arch = "x86_64")]
                $crate::isa::Isa::Avx512 => {
                    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
                    fn run $(<$($lt),*>)? ($($arg: $ty),*) -> $ret {
                        // SAFETY: this function is compiled for AVX-512 and only called
                        // below, after `level` proved the CPU has it.
                        let token = unsafe { $crate::x86::Avx512::new_unchecked() };
                        $kernel(token, $($arg),*)
                    }
                    // SAFETY: a `Level` for AVX-512 exists only when the CPU has every
                    // feature `run` is compiled with (see `Isa::is_available`).
                    unsafe { run($($arg),*) }
                }
                #[cfg(target_arch = "x86_64")]
                $crate::isa::Isa::Avx2 => {
                    #[target_feature(enable = "avx2,fma,f16c")]
                    fn run $(<$($lt),*>)? ($($arg: $ty),*) -> $ret {
                        // SAFETY: compiled for AVX2+FMA+F16C, called only after `level`
                        // proved the CPU has them.
                        let token = unsafe { $crate::x86::Avx2::new_unchecked() };
                        $kernel(token, $($arg),*)
                    }
                    // SAFETY: a `Level` for AVX2 exists only when the CPU has AVX2, FMA
                    // and F16C (see `Isa::is_available`).
                    unsafe { run($($arg),*) }
                }
                _ => $kernel($crate::scalar::Scalar, $($arg),*),
            }
        }
    )*};
}
pub(crate) use simd_dispatch;
