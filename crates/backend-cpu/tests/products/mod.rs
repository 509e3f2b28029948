//! Shared setup for the `matmul_*` and `linear_*` tests: backends to compare, seeded
//! data, and the normalized error the budgets are stated in.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use tempra_backend_cpu::{CpuBackend, CpuConfig, Isa};
use tempra_tensor::random::SplitMix64;
use tempra_tensor::tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext, Tensor};

/// The CPU backend configurations under test, with a label for messages: every ISA this
/// CPU runs (the scalar path always), each on 1 thread and on 3 (more tasks than the
/// 2-core CI machine has cores, so the splits are exercised everywhere).
pub fn cpu_contexts() -> Vec<(String, ExecContext)> {
    let mut contexts = Vec::new();
    for isa in Isa::available() {
        for threads in [1, 3] {
            let config = CpuConfig {
                isa: Some(isa),
                threads: Some(threads),
                ..CpuConfig::default()
            };
            let backend =
                CpuBackend::with_config(HostPool::host(), config).expect("an available ISA");
            contexts.push((
                format!("cpu-{isa}-{threads}t"),
                ExecContext::new(Arc::new(backend)),
            ));
        }
    }
    contexts
}

/// The block-quantized weight formats `linear` takes: every block format but the
/// activation-only Q8_1 and Q8_K and the prepared layouts.
pub fn quant_formats() -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|d| d.is_quantized())
        .filter(|d| !matches!(d, DType::Q8_1 | DType::Q8K))
        .collect()
}

/// `n` standard-normal values from `seed`.
pub fn normal(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.next_normal() as f32).collect()
}

/// An owned host tensor of `dims` holding `values` converted to `dtype` (F32/F16/BF16).
pub fn float_tensor(values: &[f32], dims: &[usize], dtype: DType) -> Tensor {
    match dtype {
        DType::F32 => Tensor::owned_from_slice(values, dims).unwrap(),
        DType::F16 => {
            let v: Vec<half::f16> = values.iter().map(|&x| half::f16::from_f32(x)).collect();
            Tensor::owned_from_slice(&v, dims).unwrap()
        }
        DType::BF16 => {
            let v: Vec<half::bf16> = values.iter().map(|&x| half::bf16::from_f32(x)).collect();
            Tensor::owned_from_slice(&v, dims).unwrap()
        }
        other => panic!("not a float dtype: {other}"),
    }
}

/// A block-quantized `[n, k]` weight of `dtype` from `values` (ggml's reference
/// quantizer), or for a format without a quantizer random blocks seeded by `values`.
pub fn quantized_tensor(
    ctx: &ExecContext,
    values: &[f32],
    n: usize,
    k: usize,
    dtype: DType,
) -> Tensor {
    use tempra_tensor::quant;
    let bytes = if quant::has_quantizer(dtype) {
        let mut bytes = vec![0u8; dtype.bytes_for(n * k).unwrap()];
        quant::quantize_row(dtype, values, &mut bytes).unwrap();
        bytes
    } else {
        let seed = values
            .iter()
            .fold(0u64, |h, v| h.rotate_left(5) ^ v.to_bits() as u64);
        quant::random_blocks(dtype, n * k / dtype.block_len(), 1.0, seed).unwrap()
    };
    ctx.from_bytes(&bytes, &[n, k], dtype).unwrap()
}

/// The one error metric ([`tempra_tensor::compare::nmse_f32`]); every output must be
/// finite.
pub fn nmse(got: &[f32], want: &[f32]) -> f64 {
    assert!(got.iter().all(|g| g.is_finite()), "non-finite output");
    tempra_tensor::compare::nmse_f32(got, want).unwrap()
}

/// The bits of `t`'s values (for the bit-for-bit row-invariance checks).
pub fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec_f32()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}
