//! Reference norms, rope, embedding and attention.

use crate::attention::AttentionParams;
use crate::error::{Result, TensorError};
use crate::reference::host_access::{Reader, Writer, next_index, unit_of};
use crate::rope::RopeConfig;
use crate::shape::{MAX_RANK, Shape};
use crate::tensor::Tensor;

/// Calls `f(row_position, x_base, x_step)` for every row of the last dim of `x`.
pub(crate) fn for_each_row(
    x: &Tensor,
    mut f: impl FnMut(usize, usize, usize) -> Result<()>,
) -> Result<()> {
    let rank = x.rank();
    let lead_shape = Shape::new(&x.dims()[..rank.saturating_sub(1)])?;
    let lead = lead_shape.dims();
    if lead.contains(&0) || x.elem_count() == 0 {
        return Ok(());
    }
    let step = if rank == 0 {
        0
    } else {
        x.layout().strides()[rank - 1]
    };
    let mut index = [0usize; MAX_RANK];
    let mut row = 0;
    loop {
        f(row, unit_of(x, &index[..rank]), step)?;
        row += 1;
        if rank <= 1 || !next_index(&mut index[..rank - 1], lead) {
            return Ok(());
        }
    }
}

/// The value of 1-D `p` at `i`.
pub(crate) fn at(r: &Reader<'_>, p: &Tensor, i: usize) -> f64 {
    r.get(p.layout().offset() + i * p.layout().strides()[0])
}

pub(crate) fn rms_norm(x: &Tensor, w: &Tensor, eps: f64, out: &mut Tensor) -> Result<()> {
    let (rx, rw) = (Reader::new(x)?, Reader::new(w)?);
    let d = x.shape().last();
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    for_each_row(x, |row, base, step| {
        let ms = (0..d)
            .map(|i| rx.get(base + i * step).powi(2))
            .fold(0.0, |acc, v| acc + v)
            / d as f64;
        let scale = 1.0 / (ms + eps).sqrt();
        for i in 0..d {
            wr.set(
                offset + row * d + i,
                rx.get(base + i * step) * scale * at(&rw, w, i),
            );
        }
        Ok(())
    })
}

pub(crate) fn layer_norm(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    eps: f64,
    out: &mut Tensor,
) -> Result<()> {
    let (rx, rw) = (Reader::new(x)?, Reader::new(w)?);
    let rb = b.map(Reader::new).transpose()?;
    let d = x.shape().last();
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    for_each_row(x, |row, base, step| {
        let mean = (0..d)
            .map(|i| rx.get(base + i * step))
            .fold(0.0, |acc, v| acc + v)
            / d as f64;
        let var = (0..d)
            .map(|i| (rx.get(base + i * step) - mean).powi(2))
            .fold(0.0, |acc, v| acc + v)
            / d as f64;
        let scale = 1.0 / (var + eps).sqrt();
        for i in 0..d {
            let mut y = (rx.get(base + i * step) - mean) * scale * at(&rw, w, i);
            if let (Some(rb), Some(b)) = (&rb, b) {
                y += at(rb, b, i);
            }
            wr.set(offset + row * d + i, y);
        }
        Ok(())
    })
}

pub(crate) fn rope(
    x: &Tensor,
    positions: &Tensor,
    config: &RopeConfig,
    freq_factors: Option<&Tensor>,
    inverse: bool,
    out: &mut Tensor,
) -> Result<()> {
    let direction = if inverse { -1.0 } else { 1.0 };
    let (rx, rp) = (Reader::new(x)?, Reader::new(positions)?);
    let rf = freq_factors.map(Reader::new).transpose()?;
    let rank = x.rank();
    let (t_len, heads, d) = (x.dims()[rank - 3], x.dims()[rank - 2], x.dims()[rank - 1]);
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    for_each_row(x, |row, base, step| {
        let t = (row / heads) % t_len;
        let pos = at(&rp, positions, t);
        let o = offset + row * d;
        for i in 0..d {
            wr.set(o + i, rx.get(base + i * step)); // pass-through dims
        }
        for i in 0..config.rotary_dims / 2 {
            let ff = match (&rf, freq_factors) {
                (Some(rf), Some(f)) => at(rf, f, i),
                _ => 1.0,
            };
            let angle = direction * pos * config.inv_freq(i, ff);
            let (sin, cos) = angle.sin_cos();
            let (sin, cos) = (sin * config.attention_factor, cos * config.attention_factor);
            let (a, b) = config.pair(i);
            let (xa, xb) = (rx.get(base + a * step), rx.get(base + b * step));
            wr.set(o + a, xa * cos - xb * sin);
            wr.set(o + b, xa * sin + xb * cos);
        }
        Ok(())
    })
}

pub(crate) fn embedding(table: &Tensor, ids: &Tensor, out: &mut Tensor) -> Result<()> {
    let (rt, ri) = (Reader::new(table)?, Reader::new(ids)?);
    let (vocab, d) = (table.dims()[0], table.dims()[1]);
    let (row_stride, col_stride) = (table.layout().strides()[0], table.layout().strides()[1]);
    let dtype = table.dtype();
    let bl = dtype.block_len();
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    let mut block = [0f32; 256];
    for (position, unit) in crate::layout::StridedIndex::new(ids.layout()).enumerate() {
        let id = ri.get(unit) as usize;
        if id >= vocab {
            return Err(TensorError::Argument {
                op: "embedding",
                name: "ids",
                reason: format!(
                    "id {id} at position {position} is out of range for a vocabulary of {vocab}"
                ),
            });
        }
        let row_base = table.layout().offset() + id * row_stride;
        let o = offset + position * d;
        if dtype.is_quantized() {
            for blk in 0..d / bl {
                rt.dequantize_block(row_base + blk * col_stride, &mut block[..bl])?;
                for (e, &v) in block[..bl].iter().enumerate() {
                    wr.set(o + blk * bl + e, v as f64);
                }
            }
        } else {
            for i in 0..d {
                wr.set(o + i, rt.get(row_base + i * col_stride));
            }
        }
    }
    Ok(())
}

pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sinks: Option<&Tensor>,
    params: &AttentionParams,
    out: &mut Tensor,
) -> Result<()> {
    let (rq, rk, rv) = (Reader::new(q)?, Reader::new(k)?, Reader::new(v)?);
    let sink_reader = sinks.map(Reader::new).transpose()?;
    // Head `h`'s sink logit, if any.
    let sink = |h: usize| -> Option<f64> {
        let (s, r) = (sinks?, sink_reader.as_ref()?);
        Some(r.get(s.layout().offset() + h * s.layout().strides()[0]))
    };
    let r = q.rank();
    let (tq, hq, d) = (q.dims()[r - 3], q.dims()[r - 2], q.dims()[r - 1]);
    let (tk, hkv, dv) = (k.dims()[r - 3], k.dims()[r - 2], v.dims()[r - 1]);
    let group = hq / hkv;
    let offset = out.layout().offset();
    let mut wr = Writer::new(out)?;
    let (ks, vs) = (k.layout().strides(), v.layout().strides());
    let q_step = q.layout().strides()[r - 1];
    for_each_row(q, |row, q_base, _| {
        // row enumerates [lead.., t, h] of q.
        let h = row % hq;
        let t = (row / hq) % tq;
        let lead = row / (hq * tq);
        let kvh = h / group;
        let q_pos = params.q_start + t;
        // Unit of k/v at [lead.., j, kvh, 0]: the lead offset from the flattened lead index.
        let lead_unit = |s: &[usize], l: &Tensor| -> usize {
            let mut rest = lead;
            let mut unit = l.layout().offset();
            for dim in (0..r - 3).rev() {
                let size = l.dims()[dim];
                unit += (rest % size) * s[dim];
                rest /= size;
            }
            unit
        };
        let (k_lead, v_lead) = (lead_unit(ks, k), lead_unit(vs, v));
        let score = |j: usize| -> Result<f64> {
            let kb = k_lead + j * ks[r - 3] + kvh * ks[r - 2];
            let mut dot = 0.0;
            for_row_chunks(&rk, k, kb, ks[r - 1], d, |e0, keys| {
                for (e, kv) in keys.iter().enumerate() {
                    dot += rq.get(q_base + (e0 + e) * q_step) * kv;
                }
            })?;
            let s = dot * params.scale as f64;
            Ok(match params.softcap {
                Some(c) => c as f64 * (s / c as f64).tanh(),
                None => s,
            })
        };
        let visible = |j: usize| params.visible(q_pos, j);
        let mut max = f64::NEG_INFINITY;
        for j in (0..tk).filter(|&j| visible(j)) {
            max = max.max(score(j)?);
        }
        // A sink joins the softmax as one more logit with no value.
        let sink = sink(h);
        if let Some(s) = sink {
            max = max.max(s);
        }
        let mut sum = sink.map_or(0.0, |s| (s - max).exp());
        for j in (0..tk).filter(|&j| visible(j)) {
            sum += (score(j)? - max).exp();
        }
        // The weighted values, a chunk of the value dims at a time (one block of a
        // quantized cache, one value of a float one), keys in order.
        let o = offset + row * dv;
        let chunk = chunk_len(v);
        let mut acc = [0f64; 256];
        for c0 in (0..dv).step_by(chunk) {
            let n = chunk.min(dv - c0);
            acc[..n].fill(0.0);
            for j in (0..tk).filter(|&j| visible(j)) {
                let w = (score(j)? - max).exp() / sum;
                let vb = v_lead + j * vs[r - 3] + kvh * vs[r - 2];
                let at = vb + c0 / chunk * vs[r - 1];
                read_chunk(&rv, v, at, vs[r - 1], n, |values| {
                    for (a, x) in acc[..n].iter_mut().zip(values) {
                        *a += w * x;
                    }
                })?;
            }
            for (e, a) in acc[..n].iter().enumerate() {
                wr.set(o + c0 + e, if sum > 0.0 { *a } else { 0.0 });
            }
        }
        Ok(())
    })
}

/// Values per chunk [`for_row_chunks`] reads `t`'s rows in: a block of a block dtype,
/// one value of a plain one.
fn chunk_len(t: &Tensor) -> usize {
    if t.dtype().is_quantized() {
        t.dtype().block_len()
    } else {
        1
    }
}

/// Calls `f(first, values)` over the `len` values of a row of `t` from storage unit
/// `base` (units `step` apart along the row), a chunk at a time ([`chunk_len`]), in order.
fn for_row_chunks(
    r: &Reader<'_>,
    t: &Tensor,
    base: usize,
    step: usize,
    len: usize,
    mut f: impl FnMut(usize, &[f64]),
) -> Result<()> {
    let chunk = chunk_len(t);
    for (c, c0) in (0..len).step_by(chunk).enumerate() {
        let n = chunk.min(len - c0);
        read_chunk(r, t, base + c * step, step, n, |values| f(c0, values))?;
    }
    Ok(())
}

/// The `n` values of one chunk of a row of `t` at storage unit `at` (a whole block of a
/// block dtype, dequantized; `n` plain values `step` apart otherwise), passed to `f`.
fn read_chunk(
    r: &Reader<'_>,
    t: &Tensor,
    at: usize,
    step: usize,
    n: usize,
    f: impl FnOnce(&[f64]),
) -> Result<()> {
    let mut values = [0f64; 256];
    if t.dtype().is_quantized() {
        let mut block = [0f32; 256];
        let bl = t.dtype().block_len();
        r.dequantize_block(at, &mut block[..bl])?;
        for (v, b) in values.iter_mut().zip(&block[..n]) {
            *v = *b as f64;
        }
    } else {
        for (i, v) in values[..n].iter_mut().enumerate() {
            *v = r.get(at + i * step);
        }
    }
    f(&values[..n]);
    Ok(())
}
