//! upload, fill and copy: strided copies, dtype casts (SIMD for f32 ↔ f16/bf16),
//! dequantizing copies and f32 rows quantized into a 32-value block format (a quantized
//! KV cache's write).

use half::{bf16, f16};
use tempra_tensor::{DType, Element, Result, Tensor, TensorError, quant};

use crate::kernels::convert;
use crate::ops::{Exec, MIN_CHEAP, Outcome, gather, input, min_rows, output, plain};
use crate::strided::Walk;

/// Bytes per task for memory copies.
const MIN_COPY_BYTES: usize = 1 << 18;

/// Copies host bytes into the contiguous `out`.
pub(crate) fn upload(exec: &Exec<'_>, src: &[u8], out: &mut Tensor) -> Result<Outcome> {
    let bb = out.dtype().block_bytes();
    let Some(range) = out.layout().contiguous_range() else {
        return Ok(Outcome::Delegate);
    };
    let Ok(bytes) = out.host_slice_mut::<u8>() else {
        return Ok(Outcome::Delegate);
    };
    let Some(dst) = bytes.get_mut(range.start * bb..range.end * bb) else {
        return Ok(Outcome::Delegate);
    };
    if dst.len() != src.len() {
        return Err(TensorError::Argument {
            op: "upload",
            name: "src",
            reason: format!("{} bytes for an output of {}", src.len(), dst.len()),
        });
    }
    exec.workers
        .parallel_chunks_mut(dst, 1, MIN_COPY_BYTES, |range, part| {
            part.copy_from_slice(&src[range])
        });
    Ok(Outcome::Done)
}

/// Sets every element of `out` (a plain dtype, any layout) to `value`.
pub(crate) fn fill(exec: &Exec<'_>, out: &mut Tensor, value: f64) -> Result<Outcome> {
    let layout = *out.layout();
    tempra_tensor::with_element_type!(out.dtype(), T => {
        let v = T::from_f64(value);
        let Ok(data) = out.host_slice_mut::<T>() else { return Ok(Outcome::Delegate) };
        match layout.contiguous_range() {
            Some(range) => {
                let min = MIN_COPY_BYTES / size_of::<T>();
                exec.workers.parallel_chunks_mut(&mut data[range], 1, min, |_, part| part.fill(v));
            }
            None => {
                let walk = Walk::new([&layout]);
                let stride = walk.inner_strides()[0];
                walk.for_each_run(0..layout.elem_count(), |[o], len| {
                    for i in 0..len {
                        data[o + i * stride] = v;
                    }
                })
            }
        }
        Ok(Outcome::Done)
    }, _ => Ok(Outcome::Delegate))
}

/// Copies `src` into `dst`'s layout (same shape), converting plain dtypes, copying
/// blocks of one block dtype, or dequantizing a block dtype into a float one.
pub(crate) fn copy(exec: &Exec<'_>, src: &Tensor, dst: &mut Tensor) -> Result<Outcome> {
    if src.dims() != dst.dims() {
        return Err(TensorError::ShapeMismatch {
            op: "copy",
            lhs: *src.shape(),
            rhs: *dst.shape(),
        });
    }
    let (sd, dd) = (src.dtype(), dst.dtype());
    match (sd.is_quantized(), dd.is_quantized()) {
        (false, false) => copy_plain(exec, src, dst),
        (true, true) if sd == dd => copy_blocks(src, dst),
        (true, false) if dd == DType::F32 => dequantize(exec, src, dst),
        // Dequantizing into other dtypes or strided outputs: the reference.
        (true, false) => Ok(Outcome::Delegate),
        (false, true) if sd == DType::F32 && dd.block_len() == 32 => quantize_rows(src, dst),
        // Other formats (the K-quants' search) and sources: the reference.
        (false, true) => Ok(Outcome::Delegate),
        _ => Err(TensorError::DTypeMismatch {
            op: "copy",
            lhs: sd,
            rhs: dd,
        }),
    }
}

/// Plain → plain: SIMD conversions for f32 ↔ f16/bf16, memcpy-like runs for one dtype,
/// a generic f64 round trip otherwise (the reference's exact semantics).
fn copy_plain(exec: &Exec<'_>, src: &Tensor, dst: &mut Tensor) -> Result<Outcome> {
    let level = exec.level;
    match (src.dtype(), dst.dtype()) {
        (DType::F16, DType::F32) => {
            let Some(s) = input::<f16>(src) else {
                return Ok(Outcome::Delegate);
            };
            copy_runs(exec, src, dst, |o, st, y: &mut [f32]| {
                if st == 1 {
                    convert::f16_to_f32(level, x_slice(s, o, y.len()), y)
                } else {
                    gather_map(s, o, st, y, f16::to_f32)
                }
            })
        }
        (DType::BF16, DType::F32) => {
            let Some(s) = input::<bf16>(src) else {
                return Ok(Outcome::Delegate);
            };
            copy_runs(exec, src, dst, |o, st, y: &mut [f32]| {
                if st == 1 {
                    convert::bf16_to_f32(level, x_slice(s, o, y.len()), y)
                } else {
                    gather_map(s, o, st, y, bf16::to_f32)
                }
            })
        }
        (DType::F32, DType::F16) => {
            let Some(s) = input::<f32>(src) else {
                return Ok(Outcome::Delegate);
            };
            copy_runs(exec, src, dst, |o, st, y: &mut [f16]| {
                if st == 1 {
                    convert::f32_to_f16(level, x_slice(s, o, y.len()), y)
                } else {
                    gather_map(s, o, st, y, f16::from_f32)
                }
            })
        }
        (DType::F32, DType::BF16) => {
            let Some(s) = input::<f32>(src) else {
                return Ok(Outcome::Delegate);
            };
            copy_runs(exec, src, dst, |o, st, y: &mut [bf16]| {
                if st == 1 {
                    convert::f32_to_bf16(level, x_slice(s, o, y.len()), y)
                } else {
                    gather_map(s, o, st, y, bf16::from_f32)
                }
            })
        }
        (a, b) if a == b => tempra_tensor::with_element_type!(a, T => {
            let Some(s) = input::<T>(src) else { return Ok(Outcome::Delegate) };
            copy_runs(exec, src, dst, |o, st, y: &mut [T]| gather(s, o, st, y))
        }, _ => Ok(Outcome::Delegate)),
        (a, _) => {
            tempra_tensor::with_element_type!(a, S => {
                let Some(s) = input::<S>(src) else { return Ok(Outcome::Delegate) };
                copy_via_f64(exec, s, src, dst)
            }, _ => Ok(Outcome::Delegate))
        }
    }
}

/// `len` values of `s` from `o`.
#[inline]
fn x_slice<T>(s: &[T], o: usize, len: usize) -> &[T] {
    &s[o..o + len]
}

/// `y[i] = f(s[o + i·stride])`.
#[inline]
fn gather_map<T: Copy, U>(s: &[T], o: usize, stride: usize, y: &mut [U], f: impl Fn(T) -> U) {
    for (i, d) in y.iter_mut().enumerate() {
        *d = f(s[o + i * stride]);
    }
}

/// Runs `run(src_offset, src_stride, dst_run)` over matching runs of `src` and `dst`.
/// A contiguous `dst` is split between threads; a strided one (a region of a larger
/// tensor, such as a KV cache write) is written on the calling thread through a small
/// stack buffer.
fn copy_runs<T: Element>(
    exec: &Exec<'_>,
    src: &Tensor,
    dst: &mut Tensor,
    run: impl Fn(usize, usize, &mut [T]) + Sync,
) -> Result<Outcome> {
    let dst_layout = *dst.layout();
    let n = dst_layout.elem_count();
    if dst_layout.is_contiguous() {
        let walk = Walk::new([src.layout()]);
        let stride = walk.inner_strides()[0];
        let Some(y) = output::<T>(dst) else {
            return Ok(Outcome::Delegate);
        };
        let min = (MIN_CHEAP * 4 / size_of::<T>()).max(1);
        exec.workers.parallel_chunks_mut(y, 1, min, |range, part| {
            let mut pos = 0;
            walk.for_each_run(range, |[o], len| {
                run(o, stride, &mut part[pos..pos + len]);
                pos += len;
            });
        });
        return Ok(Outcome::Done);
    }
    let walk = Walk::new([src.layout(), &dst_layout]);
    let [ss, ds] = walk.inner_strides();
    let Ok(y) = dst.host_slice_mut::<T>() else {
        return Ok(Outcome::Delegate);
    };
    let mut buf = [T::from_f64(0.0); 256];
    walk.for_each_run(0..n, |[so, d0], len| {
        let mut done = 0;
        while done < len {
            let m = (len - done).min(buf.len());
            run(so + done * ss, ss, &mut buf[..m]);
            if ds == 1 {
                y[d0 + done..d0 + done + m].copy_from_slice(&buf[..m]);
            } else {
                for (i, &v) in buf[..m].iter().enumerate() {
                    y[d0 + (done + i) * ds] = v;
                }
            }
            done += m;
        }
    });
    Ok(Outcome::Done)
}

/// Any plain dtype pair not specialised above, through f64 (exactly the reference's
/// conversions: round to nearest for floats, saturating truncation for integers).
fn copy_via_f64<S: Element>(
    exec: &Exec<'_>,
    s: &[S],
    src: &Tensor,
    dst: &mut Tensor,
) -> Result<Outcome> {
    tempra_tensor::with_element_type!(dst.dtype(), D => {
        copy_runs(exec, src, dst, |o, st, y: &mut [D]| {
            let mut buf = [0f64; 64];
            for (k, part) in y.chunks_mut(64).enumerate() {
                let b = &mut buf[..part.len()];
                plain::read(s, o + k * 64 * st, st, b);
                plain::write(b, part, 0, 1);
            }
        })
    }, _ => Ok(Outcome::Delegate))
}

/// Block dtype → same block dtype: whole blocks, walking both layouts in units.
fn copy_blocks(src: &Tensor, dst: &mut Tensor) -> Result<Outcome> {
    let bb = src.dtype().block_bytes();
    let dst_layout = *dst.layout();
    let walk = Walk::new([src.layout(), &dst_layout]);
    let [ss, ds] = walk.inner_strides();
    let Ok(s) = src.storage().host_bytes() else {
        return Ok(Outcome::Delegate);
    };
    let Ok(d) = dst.host_slice_mut::<u8>() else {
        return Ok(Outcome::Delegate);
    };
    walk.for_each_run(0..walk.count(), |[so, d0], len| {
        if ss == 1 && ds == 1 {
            d[d0 * bb..(d0 + len) * bb].copy_from_slice(&s[so * bb..(so + len) * bb]);
        } else {
            for i in 0..len {
                let (a, b) = ((so + i * ss) * bb, (d0 + i * ds) * bb);
                d[b..b + bb].copy_from_slice(&s[a..a + bb]);
            }
        }
    });
    Ok(Outcome::Done)
}

/// F32 → a 32-value block format (the KV cache write into a Q8_0 or Q4_0 cache): each row
/// of the last dim quantized block by block, as the reference quantizes (ggml's
/// reference rounding), rows in any layout whose last dim is unit-stride. On the calling
/// thread: a step writes a few rows per layer.
fn quantize_rows(src: &Tensor, dst: &mut Tensor) -> Result<Outcome> {
    let dtype = dst.dtype();
    let (bl, bb) = (dtype.block_len(), dtype.block_bytes());
    let d = src.shape().last();
    let r = src.rank();
    let unit_rows = r == 0 || d <= 1 || src.layout().strides()[r - 1] == 1;
    let dst_unit_rows = r == 0 || d <= bl || dst.layout().strides()[r - 1] == 1;
    if !unit_rows || !dst_unit_rows || !d.is_multiple_of(bl) {
        return Ok(Outcome::Delegate);
    }
    let walk = Walk::new([
        &crate::ops::row_starts(src.layout()),
        &crate::ops::row_starts(dst.layout()),
    ]);
    let [ss, ds] = walk.inner_strides();
    let Some(s) = input::<f32>(src) else {
        return Ok(Outcome::Delegate);
    };
    let Ok(out) = dst.host_slice_mut::<u8>() else {
        return Ok(Outcome::Delegate);
    };
    let row_bytes = d / bl * bb;
    let mut result = Ok(());
    walk.for_each_run(0..walk.count(), |[so, d0], len| {
        for i in 0..len {
            let (a, b) = (so + i * ss, (d0 + i * ds) * bb);
            if let Err(e) = quant::quantize_row(dtype, &s[a..a + d], &mut out[b..b + row_bytes]) {
                result = Err(e);
            }
        }
    });
    result.map(|()| Outcome::Done)
}

/// Block dtype → contiguous F32: each row's blocks dequantized straight into the output
/// (rows in parallel).
fn dequantize(exec: &Exec<'_>, src: &Tensor, dst: &mut Tensor) -> Result<Outcome> {
    let dtype = src.dtype();
    let (bl, bb) = (dtype.block_len(), dtype.block_bytes());
    let d = src.shape().last();
    let blocks = d / bl;
    let starts = Walk::new([&crate::ops::row_starts(src.layout())]);
    let stride = starts.inner_strides()[0];
    let Ok(bytes) = src.storage().host_bytes() else {
        return Ok(Outcome::Delegate);
    };
    let Some(y) = output::<f32>(dst) else {
        return Ok(Outcome::Delegate);
    };
    if d == 0 {
        return Ok(Outcome::Done);
    }
    let result = std::sync::Mutex::new(Ok(()));
    exec.workers
        .parallel_chunks_mut(y, d, min_rows(d, MIN_CHEAP / 4), |rows, part| {
            let mut r = 0;
            starts.for_each_run(rows, |[o], len| {
                for i in 0..len {
                    let unit = o + i * stride;
                    let row = &bytes[unit * bb..(unit + blocks) * bb];
                    if let Err(e) = quant::dequantize_row(dtype, row, &mut part[r * d..(r + 1) * d])
                    {
                        *result.lock().unwrap_or_else(|p| p.into_inner()) = Err(e);
                    }
                    r += 1;
                }
            });
        });
    result.into_inner().unwrap_or_else(|p| p.into_inner())?;
    Ok(Outcome::Done)
}
