//! x86-64 [`Simd`](crate::simd::Simd) tokens: [`Avx2`] (8 f32 lanes) and [`Avx512`]
//! (16 lanes). Each is a zero-sized proof that the CPU has the ISA's features; the only
//! way to get one is `new_unchecked`, called by `simd_dispatch!` inside a function
//! compiled for those features after a [`Level`](crate::isa::Level) checked them.

mod avx2;
mod avx512;

pub(crate) use avx2::Avx2;
pub(crate) use avx512::Avx512;
