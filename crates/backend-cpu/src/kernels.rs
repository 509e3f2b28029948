//! The row kernels, each written once over [`crate::simd::Simd`] and instantiated per
//! ISA by `simd_dispatch!`. They work on contiguous slices; the op layer
//! ([`crate::ops`]) walks layouts and splits work between threads.

pub(crate) mod attention;
pub(crate) mod attention_blocked;
pub(crate) mod convert;
pub(crate) mod elementwise;
pub(crate) mod norm;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod softmax;
