//! `Element`: the plain (non-block) value types a tensor can hold, with lossless-enough
//! conversion through f64 for reference code.

use half::{bf16, f16};

use crate::dtype::DType;

/// A plain value type stored one per element.
pub trait Element: bytemuck::Pod + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// The matching dtype.
    const DTYPE: DType;
    /// The value as f64 (exact for every type here).
    fn to_f64(self) -> f64;
    /// The nearest value to `v` (saturating and truncating toward zero for integers,
    /// round-to-nearest-even for floats).
    fn from_f64(v: f64) -> Self;
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    #[inline]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline]
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    #[inline]
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as i32
    }
}

impl Element for u32 {
    const DTYPE: DType = DType::U32;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as u32
    }
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
    #[inline]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as u8
    }
}

/// Calls `$body` with `$T` bound to the element type of a plain `$dtype`; evaluates
/// `$other` for block dtypes.
#[macro_export]
macro_rules! with_element_type {
    ($dtype:expr, $T:ident => $body:expr, _ => $other:expr) => {
        match $dtype {
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            _ => $other,
        }
    };
}
