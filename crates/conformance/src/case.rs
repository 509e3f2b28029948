//! One conformance case: host inputs, the op run on them, and the budget its result is
//! held to.

use std::sync::Arc;

use tempra_tensor::half::{bf16, f16};
use tempra_tensor::random::SplitMix64;
use tempra_tensor::{DType, ExecContext, Layout, Shape, Storage, Tensor, quant};

use crate::budget::Precision;
use crate::error::Result;

/// The op of a case: it receives the inputs on the context under test (uploaded there,
/// contiguous) and returns the outputs to compare. It may take views of its inputs
/// (transposes, narrows, broadcasts) so strided operands reach the kernels.
pub type CaseOp =
    Arc<dyn Fn(&ExecContext, &[Tensor]) -> tempra_tensor::Result<Vec<Tensor>> + Send + Sync>;

/// One op on one set of shapes.
#[derive(Clone)]
pub struct Case {
    /// The op family (the `Backend` method it exercises), for grouping in reports.
    pub family: &'static str,
    /// What distinguishes this case within its family (shapes, dtypes, views).
    pub name: String,
    /// The kind of arithmetic the result goes through, which sets its budget.
    pub precision: Precision,
    /// The inputs, as contiguous host tensors.
    pub inputs: Vec<Tensor>,
    /// Inputs the oracle takes as they are instead of widened to f64 (parameters an op
    /// accepts in one dtype only, such as rope's f32 frequency factors).
    pub kept: Vec<usize>,
    /// The op.
    pub op: CaseOp,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("family", &self.family)
            .field("name", &self.name)
            .field("precision", &self.precision)
            .finish_non_exhaustive()
    }
}

impl Case {
    /// A case of `family` named `name` held to `precision`'s budget.
    pub fn new(
        family: &'static str,
        name: impl Into<String>,
        precision: Precision,
        inputs: Vec<Tensor>,
        op: impl Fn(&ExecContext, &[Tensor]) -> tempra_tensor::Result<Vec<Tensor>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            family,
            name: name.into(),
            precision,
            inputs,
            kept: Vec::new(),
            op: Arc::new(op),
        }
    }

    /// The case with input `index` given to the oracle unwidened.
    pub fn keep(mut self, index: usize) -> Self {
        self.kept.push(index);
        self
    }

    /// `family/name`, as reports print it.
    pub fn id(&self) -> String {
        format!("{}/{}", self.family, self.name)
    }
}

/// Seeded host inputs: the same values on every machine and every run.
#[derive(Debug)]
pub struct Inputs {
    rng: SplitMix64,
}

impl Inputs {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SplitMix64::new(seed),
        }
    }

    fn normals(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.rng.next_normal() as f32).collect()
    }

    /// Standard-normal f32 values of `dims`.
    pub fn normal(&mut self, dims: &[usize]) -> Result<Tensor> {
        let v = self.normals(dims.iter().product());
        Ok(Tensor::owned_from_slice(&v, dims)?)
    }

    /// Uniform f32 values in `[low, high)` of `dims`.
    pub fn uniform(&mut self, dims: &[usize], low: f32, high: f32) -> Result<Tensor> {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| low + (high - low) * self.rng.next_f64() as f32)
            .collect();
        Ok(Tensor::owned_from_slice(&v, dims)?)
    }

    /// Standard-normal values of `dims` stored as `dtype`: a float format (F32, F16,
    /// BF16) or a block format (quantized by the scalar reference quantizer; the last
    /// dim a whole number of blocks). A block format without a quantizer (IQ1, IQ2, IQ3)
    /// gets random blocks of unit root mean square instead.
    pub fn normal_as(&mut self, dims: &[usize], dtype: DType) -> Result<Tensor> {
        let v = self.normals(dims.iter().product());
        Ok(match dtype {
            DType::F32 => Tensor::owned_from_slice(&v, dims)?,
            DType::F16 => {
                let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
                Tensor::owned_from_slice(&h, dims)?
            }
            DType::BF16 => {
                let h: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
                Tensor::owned_from_slice(&h, dims)?
            }
            block => {
                let layout = Layout::contiguous(Shape::new(dims)?, block)?;
                let mut storage = Storage::owned_zeroed(layout.bytes_spanned())?;
                let bytes = storage.host_bytes_mut()?;
                if quant::has_quantizer(block) {
                    quant::quantize_row(block, &v, bytes)?;
                } else {
                    let blocks = v.len() / block.block_len();
                    bytes.copy_from_slice(&quant::random_blocks(
                        block,
                        blocks,
                        1.0,
                        self.rng.next_u64(),
                    )?);
                }
                Tensor::from_storage(storage, layout)?
            }
        })
    }

    /// U32 ids of `dims`, uniform in `0..bound`.
    pub fn ids(&mut self, dims: &[usize], bound: u32) -> Result<Tensor> {
        let n: usize = dims.iter().product();
        let v: Vec<u32> = (0..n)
            .map(|_| (self.rng.next_u64() % bound as u64) as u32)
            .collect();
        Ok(Tensor::owned_from_slice(&v, dims)?)
    }
}

/// U32 `values` of `dims` (positions, chosen ids).
pub fn u32s(values: &[u32], dims: &[usize]) -> Result<Tensor> {
    Ok(Tensor::owned_from_slice(values, dims)?)
}
