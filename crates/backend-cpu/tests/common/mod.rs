//! Shared helpers of the reference-vs-CPU tests: one context per (available ISA, thread
//! count), the reference context, and the normalized error
//! `max|a − b| / max(1e-6, max|b|)`.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use tempra_backend_cpu::{CpuBackend, CpuConfig, Isa};
use tempra_tensor::tempra_pool::HostPool;
use tempra_tensor::{DType, ExecContext, Result, Tensor};

/// Odd and round sizes every op family is tried on.
pub const SIZES: &[usize] = &[1, 3, 17, 33, 255, 257];

/// A CPU context for one ISA and thread count.
pub struct Cpu {
    /// `isa/threads`, for messages.
    pub name: String,
    /// The ISA.
    pub isa: Isa,
    /// Threads.
    pub threads: usize,
    /// The context.
    pub ctx: ExecContext,
}

/// A CPU context per available ISA (scalar always), each with 1 and 2 threads.
pub fn cpus() -> Vec<Cpu> {
    let mut out = Vec::new();
    for isa in Isa::available() {
        for threads in [1, 2] {
            let backend = CpuBackend::with_config(
                HostPool::host(),
                CpuConfig {
                    isa: Some(isa),
                    threads: Some(threads),
                },
            )
            .expect("available ISA");
            out.push(Cpu {
                name: format!("{isa}/{threads}t"),
                isa,
                threads,
                ctx: ExecContext::new(Arc::new(backend)),
            });
        }
    }
    out
}

/// The reference context.
pub fn reference() -> ExecContext {
    ExecContext::reference()
}

/// `max|a − b| / max(1e-6, max|b|)` over the elements (as f64); NaN where exactly one side
/// is NaN counts as infinite error, NaN on both sides as equal.
pub fn norm_err(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    let (a, b) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    let scale = b
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(1e-6);
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(&b) {
        let e = if (x.is_nan() && y.is_nan()) || x == y {
            0.0
        } else if x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
            f64::INFINITY
        } else {
            (x - y).abs()
        };
        worst = worst.max(e);
    }
    worst / scale
}

/// Asserts `norm_err(got, want) <= tol`.
#[track_caller]
pub fn assert_close(got: &Tensor, want: &Tensor, tol: f64, what: &str) {
    let e = norm_err(got, want);
    assert!(e <= tol, "{what}: normalized error {e:e} > {tol:e}");
}

/// Asserts two tensors hold bitwise equal values.
#[track_caller]
pub fn assert_bitwise(a: &Tensor, b: &Tensor, what: &str) {
    let (x, y) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    let same = x.len() == y.len()
        && x.iter()
            .zip(&y)
            .all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()));
    assert!(same, "{what}: threaded and single-threaded results differ");
}

/// Normal random values of `dtype` from `seed` (the same on every context).
pub fn randn(ctx: &ExecContext, dims: &[usize], dtype: DType, seed: u64) -> Tensor {
    ctx.randn(dims, dtype, 0.0, 1.0, seed).unwrap()
}

/// Runs `op` on the reference and on every CPU context, compares each with the reference
/// within `tol`, and checks the 1- and 2-thread results of each ISA agree bitwise.
pub fn check(what: &str, tol: f64, op: impl Fn(&ExecContext) -> Result<Tensor>) {
    let want = op(&reference()).unwrap_or_else(|e| panic!("{what}: reference failed: {e}"));
    let mut single: Option<(Isa, Tensor)> = None;
    for cpu in cpus() {
        let got = op(&cpu.ctx).unwrap_or_else(|e| panic!("{what} [{}]: {e}", cpu.name));
        assert_close(&got, &want, tol, &format!("{what} [{}]", cpu.name));
        match &single {
            Some((isa, first)) if *isa == cpu.isa => {
                assert_bitwise(&got, first, &format!("{what} [{}]", cpu.name))
            }
            _ => single = Some((cpu.isa, got)),
        }
    }
}
