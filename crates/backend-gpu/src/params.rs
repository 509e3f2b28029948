//! The parameter block every kernel reads from its uniform binding, and the packing of
//! strided layouts into it.
//!
//! A kernel's parameters are up to [`PARAM_WORDS`] 32-bit words (`u32`, or `f32` bits).
//! A strided layout takes [`LAYOUT_WORDS`] words: `offset, rank, dims[6], strides[6]`,
//! dims and strides stored innermost first, so `common.wgsl`'s `strided` walks only
//! `rank` dims. Layouts are collapsed first (size-1 dims dropped, dims that are contiguous
//! in every operand merged), so a dense tensor costs one dim.

use crate::error::{GpuError, Result};

/// Words in one parameter block (512 bytes).
pub(crate) const PARAM_WORDS: usize = 128;
/// Words one packed layout takes (`LAYOUT_WORDS` in `common.wgsl`).
#[cfg(test)]
const LAYOUT_WORDS: usize = 14;
/// The most dims a packed layout holds.
const MAX_DIMS: usize = 6;

/// A kernel's parameter words, filled in the order its WGSL reads them.
#[derive(Clone, Debug)]
pub(crate) struct Params {
    words: [u32; PARAM_WORDS],
    len: usize,
}

impl Params {
    pub(crate) fn new() -> Self {
        Self {
            words: [0; PARAM_WORDS],
            len: 0,
        }
    }

    /// The words written so far.
    pub(crate) fn words(&self) -> &[u32] {
        &self.words[..self.len]
    }

    /// Appends a word.
    pub(crate) fn u(&mut self, v: u32) -> &mut Self {
        // Kernels write a fixed, small number of words; an overflow is a bug caught by
        // the tests (debug assertion) and clamped in release.
        debug_assert!(self.len < PARAM_WORDS, "parameter block overflow");
        if self.len < PARAM_WORDS {
            self.words[self.len] = v;
            self.len += 1;
        }
        self
    }

    /// Appends an f32's bits.
    pub(crate) fn f(&mut self, v: f32) -> &mut Self {
        self.u(v.to_bits())
    }

    /// Appends a word from a `usize`, or an error when it does not fit in 32 bits.
    pub(crate) fn n(&mut self, v: usize, op: &'static str) -> Result<&mut Self> {
        Ok(self.u(to_u32(v, op)?))
    }

    /// Appends a packed layout: `offset` (in units of the operand's binding) and
    /// `dims`/`strides` (already collapsed, at most 6 dims).
    pub(crate) fn layout(
        &mut self,
        op: &'static str,
        offset: usize,
        dims: &[usize],
        strides: &[usize],
    ) -> Result<&mut Self> {
        debug_assert_eq!(dims.len(), strides.len());
        if dims.len() > MAX_DIMS {
            return Err(GpuError::Device {
                op,
                message: format!("{} dims after collapsing exceed {MAX_DIMS}", dims.len()),
            });
        }
        self.n(offset, op)?;
        self.n(dims.len(), op)?;
        for k in 0..MAX_DIMS {
            let v = if k < dims.len() {
                dims[dims.len() - 1 - k]
            } else {
                1
            };
            self.n(v, op)?;
        }
        for k in 0..MAX_DIMS {
            let v = if k < strides.len() {
                strides[strides.len() - 1 - k]
            } else {
                0
            };
            self.n(v, op)?;
        }
        Ok(self)
    }
}

/// `v` as u32, or an error naming the op (GPU kernels index with 32 bits).
pub(crate) fn to_u32(v: usize, op: &'static str) -> Result<u32> {
    u32::try_from(v).map_err(|_| GpuError::Device {
        op,
        message: format!("{v} does not fit the kernels' 32-bit indices"),
    })
}

/// Collapses the dims shared by several operands: drops size-1 dims and merges dims `d`
/// and `d+1` where every operand has `stride[d] == stride[d+1] * dims[d+1]`. Returns the
/// collapsed dims and each operand's collapsed strides. An empty result means a single
/// element (rank 0).
pub(crate) fn collapse(dims: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_dims: Vec<usize> = Vec::with_capacity(dims.len());
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::with_capacity(dims.len()); strides.len()];
    for d in 0..dims.len() {
        if dims[d] == 1 {
            continue;
        }
        let mergeable = !out_dims.is_empty()
            && strides.iter().zip(&out_strides).all(|(s, o)| {
                let last = *o.last().unwrap_or(&0);
                last == s[d] * dims[d]
            });
        if mergeable {
            if let Some(last) = out_dims.last_mut() {
                *last *= dims[d];
            }
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                if let Some(last) = o.last_mut() {
                    *last = s[d];
                }
            }
        } else {
            out_dims.push(dims[d]);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[d]);
            }
        }
    }
    (out_dims, out_strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_collapses_to_one_dim() {
        let (d, s) = collapse(&[2, 3, 4], &[&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(d, [24]);
        assert_eq!(s, [vec![1], vec![1]]);
    }

    #[test]
    fn transposed_and_broadcast_keep_dims() {
        // out contiguous [3, 4]; a transposed (strides 1, 3); b broadcast row (0, 1).
        let (d, s) = collapse(&[3, 4], &[&[4, 1], &[1, 3], &[0, 1]]);
        assert_eq!(d, [3, 4]);
        assert_eq!(s, [vec![4, 1], vec![1, 3], vec![0, 1]]);
    }

    #[test]
    fn size_one_dims_drop() {
        let (d, s) = collapse(&[1, 5, 1], &[&[5, 1, 1]]);
        assert_eq!(d, [5]);
        assert_eq!(s, [vec![1]]);
        let (d, s) = collapse(&[1, 1], &[&[1, 1]]);
        assert!(d.is_empty() && s[0].is_empty());
    }

    #[test]
    fn layout_words_are_innermost_first() {
        let mut p = Params::new();
        p.layout("t", 7, &[2, 3], &[3, 1]).unwrap();
        assert_eq!(p.words()[..4], [7, 2, 3, 2]);
        assert_eq!(p.words()[8..10], [1, 3]);
        assert_eq!(p.words().len(), LAYOUT_WORDS);
    }
}
