//! Creation ops: zeros, full, arange, from_slice, from_bytes, rand, randn.

use crate::context::{ExecContext, shape_for};
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Result, TensorError};
use crate::random::SplitMix64;
use crate::tensor::Tensor;

impl ExecContext {
    /// A zeroed tensor of `dims` in persistent storage that never enters the transient
    /// pool (parameters, optimizer state, caches): see [`crate::Backend::allocate_persistent`].
    pub fn zeros_persistent(&self, dims: &[usize], dtype: DType) -> Result<Tensor> {
        let layout = crate::Layout::contiguous(shape_for("zeros_persistent", dims)?, dtype)?;
        let storage = self.backend.allocate_persistent(layout.bytes_spanned())?;
        let mut out = Tensor::from_storage(storage, layout)?;
        if !dtype.is_quantized() {
            self.backend.fill(&mut out, 0.0)?;
        }
        Ok(out)
    }

    /// A contiguous copy of `t` in persistent storage (e.g. a parameter loaded from a
    /// file or made by `randn`, moved out of the transient pool).
    pub fn persistent_copy(&self, t: &Tensor) -> Result<Tensor> {
        let layout = crate::Layout::contiguous(*t.shape(), t.dtype())?;
        let storage = self.backend.allocate_persistent(layout.bytes_spanned())?;
        let mut out = Tensor::from_storage(storage, layout)?;
        self.backend.copy(t, &mut out)?;
        Ok(out)
    }

    /// A contiguous tensor of `dims` from the backend's pool whose content is
    /// unspecified (a recycled block): the output of an `*_into` op that writes every
    /// element.
    pub fn output(&self, dims: &[usize], dtype: DType) -> Result<Tensor> {
        self.alloc("output", shape_for("output", dims)?, dtype)
    }

    /// A tensor of `dims` filled with zeros.
    pub fn zeros(&self, dims: &[usize], dtype: DType) -> Result<Tensor> {
        self.full(dims, dtype, 0.0)
    }

    /// A tensor of `dims` filled with `value` (plain dtypes only).
    pub fn full(&self, dims: &[usize], dtype: DType, value: f64) -> Result<Tensor> {
        if dtype.is_quantized() {
            return Err(TensorError::DType {
                op: "full",
                dtype,
                what: "a plain dtype",
            });
        }
        let mut out = self.alloc("full", shape_for("full", dims)?, dtype)?;
        self.backend.fill(&mut out, value)?;
        Ok(out)
    }

    /// `[start, start+step, ...)` up to `end` (exclusive), as a 1-D tensor.
    pub fn arange(&self, start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        let bad = |reason: String| TensorError::Argument {
            op: "arange",
            name: "range",
            reason,
        };
        if !(step.is_finite() && step != 0.0 && start.is_finite() && end.is_finite()) {
            return Err(bad(format!(
                "start {start}, end {end}, step {step} must be finite, step non-zero"
            )));
        }
        let count = ((end - start) / step).ceil().max(0.0);
        if count > (isize::MAX as f64) / 8.0 {
            return Err(bad(format!("{count} elements is too many")));
        }
        let values: Vec<f64> = (0..count as usize)
            .map(|i| start + i as f64 * step)
            .collect();
        self.upload_f64_values("arange", &values, &[values.len()], dtype)
    }

    /// A tensor of `dims` holding a copy of `data` (row-major).
    pub fn from_slice<T: Element>(&self, data: &[T], dims: &[usize]) -> Result<Tensor> {
        self.from_bytes(bytemuck::cast_slice(data), dims, T::DTYPE)
    }

    /// Sets every element of `out` to `value` (plain dtypes); `out` must be a valid
    /// output (see the output rule of [`crate::Backend`]).
    pub fn fill(&self, out: &mut Tensor, value: f64) -> Result<()> {
        const OP: &str = "fill";
        if out.dtype().is_quantized() {
            return Err(TensorError::DType {
                op: OP,
                dtype: out.dtype(),
                what: "a plain dtype",
            });
        }
        let shape = *out.shape();
        crate::context::check_output(OP, out, &shape, out.dtype(), &[])?;
        self.backend.fill(out, value)
    }

    /// Copies `data` (row-major) into `out`, which must hold exactly `data.len()`
    /// elements of `T`'s dtype and be a valid output (see the output rule of
    /// [`crate::Backend`]): a step's token ids and positions into their arena slots.
    pub fn write_from_slice<T: Element>(&self, data: &[T], out: &mut Tensor) -> Result<()> {
        const OP: &str = "write_from_slice";
        if data.len() != out.elem_count() {
            return Err(TensorError::DataLength {
                op: OP,
                got: data.len(),
                expected: out.elem_count(),
                shape: *out.shape(),
            });
        }
        let shape = *out.shape();
        crate::context::check_output(OP, out, &shape, T::DTYPE, &[])?;
        self.backend.upload(bytemuck::cast_slice(data), out)
    }

    /// A tensor of `dims` and `dtype` from its raw little-endian bytes (any dtype,
    /// including block formats laid out as GGUF stores them).
    pub fn from_bytes(&self, bytes: &[u8], dims: &[usize], dtype: DType) -> Result<Tensor> {
        let shape = shape_for("from_bytes", dims)?;
        let mut out = self.alloc("from_bytes", shape, dtype)?;
        let expected = out.layout().bytes_spanned();
        if bytes.len() != expected {
            let per = dtype.block_bytes();
            if !dtype.is_quantized() && bytes.len().is_multiple_of(per) {
                return Err(TensorError::DataLength {
                    op: "from_bytes",
                    got: bytes.len() / per,
                    expected: expected / per,
                    shape,
                });
            }
            return Err(TensorError::Argument {
                op: "from_bytes",
                name: "bytes",
                reason: format!(
                    "got {} bytes, {dtype} shape {shape} needs {expected}",
                    bytes.len()
                ),
            });
        }
        self.backend.upload(bytes, &mut out)?;
        Ok(out)
    }

    /// Uniform values in `[low, high)`, reproducible from `seed` on every backend.
    pub fn rand(
        &self,
        dims: &[usize],
        dtype: DType,
        low: f64,
        high: f64,
        seed: u64,
    ) -> Result<Tensor> {
        let shape = shape_for("rand", dims)?;
        let mut rng = SplitMix64::new(seed);
        let values: Vec<f64> = (0..shape.elem_count())
            .map(|_| low + (high - low) * rng.next_f64())
            .collect();
        self.upload_f64_values("rand", &values, dims, dtype)
    }

    /// Normal values with `mean` and `std`, reproducible from `seed` on every backend.
    pub fn randn(
        &self,
        dims: &[usize],
        dtype: DType,
        mean: f64,
        std: f64,
        seed: u64,
    ) -> Result<Tensor> {
        let shape = shape_for("randn", dims)?;
        let mut rng = SplitMix64::new(seed);
        let values: Vec<f64> = (0..shape.elem_count())
            .map(|_| mean + std * rng.next_normal())
            .collect();
        self.upload_f64_values("randn", &values, dims, dtype)
    }

    /// Uploads f64 values converted to a plain `dtype`.
    fn upload_f64_values(
        &self,
        op: &'static str,
        values: &[f64],
        dims: &[usize],
        dtype: DType,
    ) -> Result<Tensor> {
        crate::with_element_type!(dtype, T => {
            let converted: Vec<T> = values.iter().map(|&v| T::from_f64(v)).collect();
            self.from_slice(&converted, dims)
        }, _ => Err(TensorError::DType { op, dtype, what: "a plain dtype" }))
    }
}
