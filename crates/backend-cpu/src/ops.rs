//! Op-level code: layouts, dtypes and threading around the row kernels of
//! [`crate::kernels`]. Each op returns [`Outcome::Delegate`] for the cases it leaves to
//! the reference backend (F64 data, storage that is not aligned for its dtype, and the
//! few layouts listed in the crate README).

pub(crate) mod attention;
pub(crate) mod attention_backward;
pub(crate) mod copy;
pub(crate) mod cross_entropy;
pub(crate) mod elementwise;
pub(crate) mod embedding;
pub(crate) mod norm;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod routing;
pub(crate) mod softmax;

use tempra_pool::{HostLease, HostPool};
use tempra_tensor::{DType, Layout, Result, Shape, Tensor, TensorError};

use crate::isa::Level;
use crate::strided::Walk;
use crate::workers::WorkerPool;

/// Whether an op ran or should be handed to the reference backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) enum Outcome {
    /// The kernel wrote the output.
    Done,
    /// Not handled here (see the module docs); the caller runs the reference kernel.
    Delegate,
}

impl Outcome {
    /// `Ok(())` when done, else the result of `reference`.
    pub(crate) fn or_else(self, reference: impl FnOnce() -> Result<()>) -> Result<()> {
        match self {
            Outcome::Done => Ok(()),
            Outcome::Delegate => reference(),
        }
    }
}

/// What a kernel needs from the backend: the ISA level, the workers, the pool scratch
/// comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exec<'a> {
    /// The checked ISA.
    pub level: Level,
    /// The worker pool.
    pub workers: &'a WorkerPool,
    /// The host pool (outputs and scratch leases).
    pub pool: &'a HostPool,
    /// Whether prefill may take arithmetic faster than decode's
    /// ([`crate::CpuConfig::fast_prefill`]).
    pub fast_prefill: bool,
}

impl Exec<'_> {
    /// A scratch lease of `len` f32 from the pool (kernels never allocate otherwise).
    pub(crate) fn scratch_f32(&self, op: &'static str, len: usize) -> Result<HostLease> {
        self.pool
            .acquire(len * 4)
            .map_err(|source| TensorError::Pool { op, source })
    }
}

/// Elements per task below which cheap elementwise work (add, copy) stays on one thread.
pub(crate) const MIN_CHEAP: usize = 1 << 15;
/// Elements per task for transcendental elementwise work (exp, tanh, silu, ...).
pub(crate) const MIN_HEAVY: usize = 1 << 12;

/// Rows per task so that each task covers at least `min_elems` elements of `row_len`.
pub(crate) fn min_rows(row_len: usize, min_elems: usize) -> usize {
    min_elems.div_ceil(row_len.max(1)).max(1)
}

/// The whole storage of `t` as `&[T]`, or `None` (delegate) when it is not host memory
/// aligned for `T`.
pub(crate) fn input<T: bytemuck::Pod>(t: &Tensor) -> Option<&[T]> {
    t.host_slice::<T>().ok()
}

/// The elements of a contiguous output as `&mut [T]`, or `None` (delegate).
pub(crate) fn output<T: bytemuck::Pod>(t: &mut Tensor) -> Option<&mut [T]> {
    let range = t.layout().contiguous_range()?;
    t.host_slice_mut::<T>().ok()?.get_mut(range)
}

/// The layout (in storage units) of the starts of `layout`'s rows along its last dim: its
/// other dims and strides, at its offset (a scalar layout for rank ≤ 1). Works for block
/// dtypes too, whose rows are runs of whole blocks.
pub(crate) fn row_starts(layout: &Layout) -> Layout {
    let r = layout.rank().saturating_sub(1);
    let shape = Shape::new(&layout.dims()[..r]).unwrap_or(Shape::SCALAR);
    // Valid by construction: a sub-layout of a valid layout.
    Layout::from_parts(shape, &layout.strides()[..r], layout.offset(), DType::U8).unwrap_or(*layout)
}

/// Copies `len` values starting at `src[start]`, `stride` apart, into `dst[..len]`.
#[inline]
pub(crate) fn gather<T: Copy>(src: &[T], start: usize, stride: usize, dst: &mut [T]) {
    if stride == 1 {
        let n = dst.len();
        dst.copy_from_slice(&src[start..start + n]);
        return;
    }
    for (i, d) in dst.iter_mut().enumerate() {
        *d = src[start + i * stride];
    }
}

/// Macro-free float conversion for the generic paths: every plain dtype read as f64.
pub(crate) mod plain {
    use tempra_tensor::Element;

    /// `len` values of `src` starting at `start`, `stride` apart, converted to f64.
    #[inline]
    pub(crate) fn read<T: Element>(src: &[T], start: usize, stride: usize, dst: &mut [f64]) {
        for (i, d) in dst.iter_mut().enumerate() {
            *d = src[start + i * stride].to_f64();
        }
    }

    /// Writes `src` converted to `T` at `dst[start + i·stride]`.
    #[inline]
    pub(crate) fn write<T: Element>(src: &[f64], dst: &mut [T], start: usize, stride: usize) {
        for (i, &v) in src.iter().enumerate() {
            dst[start + i * stride] = T::from_f64(v);
        }
    }
}

/// Calls `f(x_row, y_row)` for every row along the last dim of F32 `x` (whose storage is
/// `xs`), with `y` the contiguous output of the same shape; rows are split between
/// threads, at least `min_rows` per task. When the last dim is not unit-stride, `x` is
/// first gathered into a contiguous pool scratch lease (one per call).
pub(crate) fn map_rows(
    exec: &Exec<'_>,
    op: &'static str,
    xs: &[f32],
    x: &Layout,
    y: &mut [f32],
    min_rows: usize,
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) -> Result<()> {
    let d = x.shape().last();
    if d == 0 || x.elem_count() == 0 {
        return Ok(());
    }
    let unit_rows = x.rank() == 0 || x.strides()[x.rank() - 1] == 1 || d == 1;
    let mut lease = None;
    let (xs, x) = if unit_rows {
        (xs, *x)
    } else {
        let n = x.elem_count();
        let lease = lease.insert(exec.scratch_f32(op, n)?);
        let buf = &mut lease.as_mut_slice::<f32>()[..n];
        let walk = Walk::new([x]);
        let [stride] = walk.inner_strides();
        let mut pos = 0;
        walk.for_each_run(0..n, |[o], len| {
            gather(xs, o, stride, &mut buf[pos..pos + len]);
            pos += len;
        });
        let layout = Layout::contiguous(*x.shape(), DType::F32)?;
        (&*buf, layout)
    };
    let starts = Walk::new([&row_starts(&x)]);
    let [ss] = starts.inner_strides();
    exec.workers
        .parallel_chunks_mut(y, d, min_rows, |rows, part| {
            let mut r = 0;
            starts.for_each_run(rows, |[o], len| {
                for i in 0..len {
                    let start = o + i * ss;
                    f(&xs[start..start + d], &mut part[r * d..(r + 1) * d]);
                    r += 1;
                }
            });
        });
    Ok(())
}

/// A 1-D F32/F16/BF16/F64 parameter (`[D]`, any stride) as a contiguous f32 slice: the
/// tensor's own storage when it already is one, else converted into `scratch`.
pub(crate) fn param_f32<'a>(
    exec: &Exec<'_>,
    op: &'static str,
    p: &'a Tensor,
    scratch: &'a mut Option<HostLease>,
) -> Result<Option<&'a [f32]>> {
    let n = p.elem_count();
    let stride = if p.rank() == 1 {
        p.layout().strides()[0]
    } else {
        1
    };
    let offset = p.layout().offset();
    if p.dtype() == DType::F32 && (stride == 1 || n <= 1) {
        return Ok(input::<f32>(p).map(|s| &s[offset..offset + n]));
    }
    let lease = scratch.insert(exec.scratch_f32(op, n)?);
    let buf = &mut lease.as_mut_slice::<f32>()[..n];
    let ok = tempra_tensor::with_element_type!(p.dtype(), T => {
        match input::<T>(p) {
            Some(src) => {
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = tempra_tensor::Element::to_f64(src[offset + i * stride]) as f32;
                }
                true
            }
            None => false,
        }
    }, _ => false);
    Ok(ok.then_some(&*buf))
}
