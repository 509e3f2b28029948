//! The I-quant codebooks as ggml's tables: the lattice grids of IQ1_S/IQ1_M, IQ2_XXS,
//! IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S, the IQ2/IQ3 sign patterns and IQ4_NL/IQ4_XS's
//! non-linear levels.
//!
//! The data is gguf-py's (`iq_grid_data.rs`, generated from the `gguf` package by
//! `crates/tensor/scripts/make_iq_grids.py`); the grids are unpacked here at compile time
//! into ggml's form: entry `i` of an 8-value grid is one `u64` whose byte `j` is value `j`
//! (little-endian, as ggml reads `(const uint8_t *)(grid + i)`), of a 4-value grid one
//! `u32`. The magnitudes of the IQ2/IQ3 grids are unsigned bytes (the signs are stored
//! apart); IQ1_S's values are -1, 0 or 1 as two's-complement bytes.

use super::iq_grid_data as data;

pub use data::{IQ1S_DELTA, KSIGNS_IQ2XS, KVALUES_IQ4NL};

/// IQ2_XXS's 256 grid entries of 8 magnitudes (8, 25 or 43).
pub static IQ2XXS_GRID: [u64; 256] = grid8(data::IQ2XXS_HEX, &data::IQ2XXS_MAP);
/// IQ2_XS's 512 grid entries of 8 magnitudes (8, 25 or 43).
pub static IQ2XS_GRID: [u64; 512] = grid8(data::IQ2XS_HEX, &data::IQ2XS_MAP);
/// IQ2_S's 1024 grid entries of 8 magnitudes (8, 25 or 43).
pub static IQ2S_GRID: [u64; 1024] = grid8(data::IQ2S_HEX, &data::IQ2S_MAP);
/// IQ3_XXS's 256 grid entries of 4 magnitudes (4, 12, 20, 28, 36, 44, 52 or 62).
pub static IQ3XXS_GRID: [u32; 256] = grid4(data::IQ3XXS_HEX, &data::IQ3XXS_MAP);
/// IQ3_S's 512 grid entries of 4 magnitudes (1, 3, 5, .., 15).
pub static IQ3S_GRID: [u32; 512] = grid4(data::IQ3S_HEX, &data::IQ3S_MAP);
/// IQ1_S's and IQ1_M's 2048 grid entries of 8 values, each -1, 0 or 1 (as `i8` bytes).
pub static IQ1S_GRID: [u64; 2048] = grid8(data::IQ1S_HEX, &data::IQ1S_MAP);

/// Bits per packed element for a map of `n` values (`ceil(log2(n))`).
const fn bits_for(n: usize) -> usize {
    let mut bits = 0;
    while (1 << bits) < n {
        bits += 1;
    }
    bits
}

/// The value of one ASCII hex digit.
const fn hex_digit(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => panic!("not a hex digit"),
    }
}

/// Packed element `i` of `hex` (gguf-py's layout: `8 / bits` elements per byte, low bits
/// first, each in a field of `8 / (8 / bits)` bits).
const fn element(hex: &[u8], bits: usize, i: usize) -> usize {
    let per_byte = 8 / bits;
    let byte = i / per_byte;
    let b = (hex_digit(hex[2 * byte]) << 4) | hex_digit(hex[2 * byte + 1]);
    let shift = (i % per_byte) * (8 / per_byte);
    ((b >> shift) as usize) & ((1 << bits) - 1)
}

/// Entries of eight values: byte `j` of entry `e` is `map[element(8e + j)]`.
const fn grid8<const N: usize>(hex: &[u8], map: &[u8]) -> [u64; N] {
    let bits = bits_for(map.len());
    assert!(hex.len() / 2 * (8 / bits) == 8 * N, "grid size");
    let mut out = [0u64; N];
    let mut e = 0;
    while e < N {
        let mut j = 0;
        while j < 8 {
            out[e] |= (map[element(hex, bits, 8 * e + j)] as u64) << (8 * j);
            j += 1;
        }
        e += 1;
    }
    out
}

/// Entries of four values: byte `j` of entry `e` is `map[element(4e + j)]`.
const fn grid4<const N: usize>(hex: &[u8], map: &[u8]) -> [u32; N] {
    let bits = bits_for(map.len());
    assert!(hex.len() / 2 * (8 / bits) == 4 * N, "grid size");
    let mut out = [0u32; N];
    let mut e = 0;
    while e < N {
        let mut j = 0;
        while j < 4 {
            out[e] |= (map[element(hex, bits, 4 * e + j)] as u32) << (8 * j);
            j += 1;
        }
        e += 1;
    }
    out
}

/// The eight values of an 8-value grid entry, as bytes.
#[inline]
pub(crate) fn entry8(grid: &[u64], index: usize) -> [u8; 8] {
    grid[index].to_le_bytes()
}

/// The four values of a 4-value grid entry, as bytes.
#[inline]
pub(crate) fn entry4(grid: &[u32], index: usize) -> [u8; 4] {
    grid[index].to_le_bytes()
}

/// The sign pattern of an IQ2/IQ3 group of eight from its 7 stored bits: bit `j` set
/// means value `j` is negative.
#[inline]
pub(crate) fn signs8(bits7: usize) -> u8 {
    KSIGNS_IQ2XS[bits7 & 127]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a (64-bit) of a table's little-endian bytes.
    fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
        bytes.into_iter().fold(0xcbf29ce484222325, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        })
    }

    /// The unpacked tables equal ggml's (`ggml-common.h` of llama.cpp as vendored in
    /// llama-cpp-python 0.3.36): the hashes of ggml's tables' bytes were computed from
    /// that file, and a few entries are copied from it.
    #[test]
    fn grids_match_ggml_tables() {
        let hash8 = |t: &[u64]| fnv1a(t.iter().flat_map(|e| e.to_le_bytes()));
        let hash4 = |t: &[u32]| fnv1a(t.iter().flat_map(|e| e.to_le_bytes()));
        assert_eq!(hash8(&IQ2XXS_GRID), 0xbb4ee025b5ac6e8e);
        assert_eq!(hash8(&IQ2XS_GRID), 0xc9b1ee61e79909bd);
        assert_eq!(hash8(&IQ2S_GRID), 0x123edd38a3b62b90);
        assert_eq!(hash4(&IQ3XXS_GRID), 0xdfa5dc83d6a155d5);
        assert_eq!(hash4(&IQ3S_GRID), 0xfa37020c25b44829);
        assert_eq!(hash8(&IQ1S_GRID), 0x6703ed863501ae2e);
        assert_eq!(IQ2XXS_GRID[11], 0x0808080819080819);
        assert_eq!(IQ2XXS_GRID[255], 0x2b2b2b1908081908);
        assert_eq!(IQ2XS_GRID[11], 0x08080808082b1919);
        assert_eq!(IQ3XXS_GRID[255], 0x3e341c04);
        assert_eq!(IQ3S_GRID[11], 0x01010503);
        assert_eq!(IQ1S_GRID[11], 0xffffffff00ff0000);
    }

    #[test]
    fn signs_have_an_even_count_of_minus_signs() {
        for bits7 in 0..128 {
            let s = signs8(bits7);
            assert_eq!(s & 0x7f, bits7 as u8);
            assert_eq!(s.count_ones() % 2, 0, "{bits7}");
        }
    }

    #[test]
    fn iq1s_values_are_ternary() {
        for e in IQ1S_GRID {
            for b in e.to_le_bytes() {
                assert!(matches!(b as i8, -1..=1));
            }
        }
        assert_eq!(
            entry8(&IQ1S_GRID, 1),
            [1, 255, 255, 255, 255, 255, 255, 255]
        );
        assert_eq!(entry4(&IQ3XXS_GRID, 5), [0x3e, 0x0c, 0x04, 0x04]);
        assert_eq!(KVALUES_IQ4NL[0], -127);
        assert_eq!(IQ1S_DELTA, 0.125);
    }
}
