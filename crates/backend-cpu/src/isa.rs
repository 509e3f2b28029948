//! Runtime instruction-set detection and the level the kernels dispatch on.
//!
//! [`Isa`] names a kernel family: AVX-512 (F+BW+VL with AVX2, FMA and F16C), AVX2 (with
//! FMA and F16C) or portable scalar code. [`Isa::detect`] picks the best one this CPU
//! runs, unless the `TEMPRA_CPU_ISA` environment variable (`scalar`, `avx2`, `avx512`)
//! asks for a lower one. The binary is built for baseline x86-64 (never
//! `target-cpu=native`); the SIMD kernels are `#[target_feature]` functions that are
//! only reached through a [`Level`], which can only be made for an ISA the CPU has.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that caps the detected ISA (`scalar`, `avx2`, `avx512`).
pub const ISA_ENV: &str = "TEMPRA_CPU_ISA";

/// A family of kernels, from the widest vectors down to portable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Portable Rust, no explicit vectors: runs on any CPU.
    Scalar,
    /// 256-bit AVX2 with FMA and F16C.
    Avx2,
    /// 512-bit AVX-512 F, BW and VL (with AVX2, FMA and F16C).
    Avx512,
}

impl Isa {
    /// Every ISA, widest first.
    pub const ALL: [Isa; 3] = [Isa::Avx512, Isa::Avx2, Isa::Scalar];

    /// The name `TEMPRA_CPU_ISA` accepts (`scalar`, `avx2`, `avx512`).
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// The SIMD width in f32 lanes.
    pub const fn f32_lanes(self) -> usize {
        match self {
            Isa::Scalar => 1,
            Isa::Avx2 => 8,
            Isa::Avx512 => 16,
        }
    }

    /// Whether this CPU runs the ISA's kernels (every feature they are compiled with).
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.is_available()
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The ISAs this CPU runs, widest first (always ends with [`Isa::Scalar`]). Tests loop
    /// over these.
    pub fn available() -> Vec<Isa> {
        Isa::ALL
            .into_iter()
            .filter(|isa| isa.is_available())
            .collect()
    }

    /// The widest ISA this CPU runs, ignoring `TEMPRA_CPU_ISA`.
    pub fn best_available() -> Isa {
        Isa::ALL
            .into_iter()
            .find(|isa| isa.is_available())
            .unwrap_or(Isa::Scalar)
    }

    /// The ISA a default backend uses: the widest this CPU runs, capped by
    /// `TEMPRA_CPU_ISA` when set. An unknown name is reported once on stderr and ignored.
    pub fn detect() -> Isa {
        static DETECTED: OnceLock<Isa> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let best = Isa::best_available();
            match std::env::var(ISA_ENV) {
                Ok(value) => match value.parse::<Isa>() {
                    Ok(cap) => Isa::ALL
                        .into_iter()
                        .find(|isa| *isa <= cap && isa.is_available())
                        .unwrap_or(Isa::Scalar),
                    Err(e) => {
                        eprintln!("tempra-backend-cpu: ignoring {ISA_ENV}: {e}");
                        best
                    }
                },
                Err(_) => best,
            }
        })
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing an [`Isa`] name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseIsaError(String);

impl fmt::Display for ParseIsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown ISA `{}` (expected scalar, avx2 or avx512)",
            self.0
        )
    }
}

impl std::error::Error for ParseIsaError {}

impl FromStr for Isa {
    type Err = ParseIsaError;

    fn from_str(s: &str) -> Result<Isa, ParseIsaError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" => Ok(Isa::Scalar),
            "avx2" => Ok(Isa::Avx2),
            "avx512" | "avx-512" => Ok(Isa::Avx512),
            _ => Err(ParseIsaError(s.to_owned())),
        }
    }
}

/// An [`Isa`] checked to be available on this CPU: the only way into the
/// `#[target_feature]` kernels, so they never run on a CPU without their features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level(Isa);

impl Level {
    /// The level for `isa`, or `None` when this CPU lacks one of its features.
    pub fn new(isa: Isa) -> Option<Level> {
        isa.is_available().then_some(Level(isa))
    }

    /// The portable level (always available).
    pub const fn scalar() -> Level {
        Level(Isa::Scalar)
    }

    /// The ISA.
    pub const fn isa(self) -> Isa {
        self.0
    }
}

/// Optional CPU features other kernels may specialise on (the quantized dot products:
/// VNNI, AVX-512 BF16), detected at runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    /// AVX2 + FMA + F16C.
    pub avx2: bool,
    /// AVX-512 F + BW + VL.
    pub avx512: bool,
    /// AVX-512 VNNI (`vpdpbusd` on 512-bit vectors).
    pub avx512_vnni: bool,
    /// AVX-VNNI (`vpdpbusd` on 256-bit vectors, VEX encoded).
    pub avx_vnni: bool,
    /// AVX-512 BF16 (`vdpbf16ps`).
    pub avx512_bf16: bool,
}

impl CpuFeatures {
    /// The features of this CPU.
    pub fn detect() -> CpuFeatures {
        #[cfg(target_arch = "x86_64")]
        {
            CpuFeatures {
                avx2: Isa::Avx2.is_available(),
                avx512: Isa::Avx512.is_available(),
                avx512_vnni: Isa::Avx512.is_available()
                    && std::arch::is_x86_feature_detected!("avx512vnni"),
                avx_vnni: Isa::Avx2.is_available()
                    && std::arch::is_x86_feature_detected!("avxvnni"),
                avx512_bf16: Isa::Avx512.is_available()
                    && std::arch::is_x86_feature_detected!("avx512bf16"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            CpuFeatures::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for isa in Isa::ALL {
            assert_eq!(isa.name().parse::<Isa>(), Ok(isa));
        }
        assert_eq!(" AVX2 ".parse::<Isa>(), Ok(Isa::Avx2));
        assert!("neon".parse::<Isa>().is_err());
    }

    #[test]
    fn scalar_is_always_available_and_levels_are_checked() {
        assert!(Isa::Scalar.is_available());
        assert_eq!(Isa::available().last(), Some(&Isa::Scalar));
        assert!(Isa::detect().is_available());
        for isa in Isa::ALL {
            assert_eq!(Level::new(isa).is_some(), isa.is_available());
        }
        assert_eq!(Level::scalar().isa(), Isa::Scalar);
    }
}
