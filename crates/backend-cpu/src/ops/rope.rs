//! Rotary position embedding of `x [.., T, H, D]` (F32), interleaved or NeoX pairs.
//!
//! Angles are computed in f64 as the reference does (`pos · inv_freq`) and reduced to
//! `[-π, π]` in f64, once per position and pair; their sin/cos are SIMD f32 polynomials
//! (error < 2e-7), shared by the `H` heads of that position, times the attention factor
//! (YaRN, LongRoPE) where it is not 1; the rotation is SIMD f32.

use std::f64::consts::TAU;

use tempra_tensor::{DType, Result, RopeConfig, RopeStyle, Tensor};

use crate::kernels::rope as kernels;
use crate::ops::{Exec, MIN_CHEAP, Outcome, gather, input, min_rows, output, row_starts};
use crate::strided::Walk;

/// Most rotated pairs per head the stack tables hold (rotary dims ≤ 1024); more go to
/// the reference.
const MAX_PAIRS: usize = 512;

/// Rotates `x` at `positions` into `out` (backwards when `inverse`).
pub(crate) fn rope(
    exec: &Exec<'_>,
    x: &Tensor,
    positions: &Tensor,
    config: &RopeConfig,
    freq_factors: Option<&Tensor>,
    inverse: bool,
    out: &mut Tensor,
) -> Result<Outcome> {
    let r = x.rank();
    let half = config.rotary_dims / 2;
    if x.dtype() != DType::F32 || r < 3 || half > MAX_PAIRS || positions.dtype() != DType::U32 {
        return Ok(Outcome::Delegate);
    }
    let (t_len, heads, d) = (x.dims()[r - 3], x.dims()[r - 2], x.dims()[r - 1]);
    let rd = 2 * half;
    let Some(pos) = input::<u32>(positions) else {
        return Ok(Outcome::Delegate);
    };
    let (pos_off, pos_stride) = (positions.layout().offset(), positions.layout().strides()[0]);
    // Inverse frequencies, with the optional GGUF `rope_freqs` factors.
    let mut inv_freq = [0f64; MAX_PAIRS];
    match freq_factors {
        Some(ff) => {
            let Some(f) = input::<f32>(ff) else {
                return Ok(Outcome::Delegate);
            };
            let (o, s) = (ff.layout().offset(), ff.layout().strides()[0]);
            for (i, v) in inv_freq[..half].iter_mut().enumerate() {
                *v = config.inv_freq(i, f[o + i * s] as f64);
            }
        }
        None => {
            for (i, v) in inv_freq[..half].iter_mut().enumerate() {
                *v = config.inv_freq(i, 1.0);
            }
        }
    }
    let Some(xs) = input::<f32>(x) else {
        return Ok(Outcome::Delegate);
    };
    let x_step = x.layout().strides()[r - 1];
    let starts = Walk::new([&row_starts(x.layout())]);
    let [row_stride] = starts.inner_strides();
    let Some(y) = output::<f32>(out) else {
        return Ok(Outcome::Delegate);
    };
    if y.is_empty() {
        return Ok(Outcome::Done);
    }
    let level = exec.level;
    let direction = if inverse { -1.0 } else { 1.0 };
    let style = config.style;
    // The rotated dims' multiplier (YaRN, LongRoPE), applied to the tables.
    let attention_factor = config.attention_factor as f32;
    let item_len = heads * d;
    exec.workers.parallel_chunks_mut(
        y,
        item_len,
        min_rows(item_len + 16 * half, MIN_CHEAP / 4),
        |items, part| {
            let (mut cos, mut sin) = ([0f32; 2 * MAX_PAIRS], [0f32; 2 * MAX_PAIRS]);
            let mut angles = [0f32; 2 * MAX_PAIRS];
            for (local, item) in items.clone().enumerate() {
                let t = item % t_len;
                let p = pos[pos_off + t * pos_stride] as f64;
                // Angles in f64 as the reference computes them, reduced to [-π, π] in f64 (so
                // large positions keep their accuracy); sin/cos in SIMD f32. Interleaved
                // tables are per element: (-θ, θ) per pair gives (cos θ, cos θ) and
                // (-sin θ, sin θ).
                for i in 0..half {
                    let theta = direction * p * inv_freq[i];
                    let r = (theta - TAU * (theta / TAU).round()) as f32;
                    match style {
                        RopeStyle::Interleaved => (angles[2 * i], angles[2 * i + 1]) = (-r, r),
                        RopeStyle::Neox => angles[i] = r,
                    }
                }
                let n = if style == RopeStyle::Interleaved {
                    rd
                } else {
                    half
                };
                kernels::sin_cos(level, &angles[..n], &mut sin[..n], &mut cos[..n]);
                if attention_factor != 1.0 {
                    for (c, s) in cos[..n].iter_mut().zip(&mut sin[..n]) {
                        (*c, *s) = (*c * attention_factor, *s * attention_factor);
                    }
                }
                let rows = &mut part[local * item_len..(local + 1) * item_len];
                let mut h = 0;
                starts.for_each_run(item * heads..(item + 1) * heads, |[o], len| {
                    for i in 0..len {
                        let row = &mut rows[h * d..(h + 1) * d];
                        gather(xs, o + i * row_stride, x_step, row);
                        match style {
                            RopeStyle::Interleaved => kernels::rope_interleaved(
                                level,
                                &mut row[..rd],
                                &cos[..rd],
                                &sin[..rd],
                            ),
                            RopeStyle::Neox => kernels::rope_neox(
                                level,
                                &mut row[..rd],
                                &cos[..half],
                                &sin[..half],
                            ),
                        }
                        h += 1;
                    }
                });
            }
        },
    );
    Ok(Outcome::Done)
}
