//! `Backend::matmul` on the CPU: batched `a [.., M, K] · b [.., K, N]` through the f32
//! GEMM, each batch's operands used in place (strided, transposed, broadcast views).

use tempra_tensor::{DType, Result, Tensor, TensorError};

use crate::gemm::{Gemm, MatRef, OutPtr, Values};

/// Below this many multiply-adds per matrix, batches run in parallel instead of each
/// product splitting its output.
const SMALL_PRODUCT_MACS: usize = 1 << 22;

/// The values of a F32/F16/BF16 tensor's storage.
pub(crate) fn float_values<'a>(op: &'static str, t: &'a Tensor) -> Result<Values<'a>> {
    Ok(match t.dtype() {
        DType::F32 => Values::F32(t.host_slice::<f32>()?),
        DType::F16 => Values::F16(t.host_slice::<half::f16>()?),
        DType::BF16 => Values::BF16(t.host_slice::<half::bf16>()?),
        other => {
            return Err(TensorError::DType {
                op,
                dtype: other,
                what: "f32, f16 or bf16",
            });
        }
    })
}

/// The storage offset of batch `index` (row-major over `dims`) given per-dim `strides`.
pub(crate) fn batch_offset(mut index: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut offset = 0;
    for (&d, &s) in dims.iter().zip(strides).rev() {
        offset += (index % d) * s;
        index /= d;
    }
    offset
}

/// `out [.., M, N] = a [.., M, K] · b [.., K, N]` with batch dims already broadcast;
/// `a`, `b` F32/F16/BF16, `out` contiguous F32.
pub(crate) fn matmul(g: &Gemm<'_>, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
    const OP: &str = "matmul";
    let rank = out.rank();
    let dims = out.dims().to_vec();
    let (m, n, k) = (dims[rank - 2], dims[rank - 1], a.dims()[rank - 1]);
    let batch_dims = &dims[..rank - 2];
    let batches: usize = batch_dims.iter().product();
    let (va, vb) = (float_values(OP, a)?, float_values(OP, b)?);
    let (la, lb) = (a.layout(), b.layout());
    let (sa, sb) = (la.strides(), lb.strides());
    let matrix = |values, offset, s: &[usize]| MatRef {
        values,
        offset,
        rs: s[rank - 2],
        cs: s[rank - 1],
    };
    let out_offset = out.layout().offset();
    let c = &mut out.host_slice_mut::<f32>()?[out_offset..out_offset + batches * m * n];
    if c.is_empty() {
        return Ok(());
    }
    let c_ptr = OutPtr::new(c, n);
    let operands = |bi: usize| {
        let a = matrix(
            va,
            la.offset() + batch_offset(bi, batch_dims, &sa[..rank - 2]),
            sa,
        );
        let b = matrix(
            vb,
            lb.offset() + batch_offset(bi, batch_dims, &sb[..rank - 2]),
            sb,
        );
        (a, b)
    };
    let macs = m * n * k.max(1);
    if batches > 1 && macs < SMALL_PRODUCT_MACS && g.par.threads() > 1 {
        let error = std::sync::Mutex::new(None);
        let min_items = (SMALL_PRODUCT_MACS / 16).div_ceil(macs).max(1);
        let scratch = g.task_scratch(m, n, k, batches, min_items)?;
        g.par.parallel_for(batches, min_items, &|range| {
            let result = scratch.with(|buf| {
                for bi in range.clone() {
                    let (a, b) = operands(bi);
                    // SAFETY: batch `bi` owns rows `bi*m .. (bi+1)*m` of the `batches*m ×
                    // n` output, disjoint from every other batch's; `buf` holds the
                    // scratch of an `m × n` task.
                    unsafe { g.task_in(m, n, k, a, b, c_ptr.at(bi * m, 0), buf)? };
                }
                Ok(())
            });
            if let Err(e) = result {
                *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        });
        return match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        };
    }
    for bi in 0..batches {
        let (a, b) = operands(bi);
        // SAFETY: rows `bi*m ..` of the output slice `c`, which this call holds mutably.
        unsafe { g.gemm(m, n, k, a, b, c_ptr.at(bi * m, 0))? };
    }
    Ok(())
}
