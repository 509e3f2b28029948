//! Shared helpers of the reference-vs-CPU tests: one context per (available ISA, thread
//! count), the reference context, and comparisons in the one error metric,
//! [`tempra_tensor::compare::nmse`] (budgets are NMSE).

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
                    ..CpuConfig::default()
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

/// The NMSE of `got` against `want` ([`tempra_tensor::compare::nmse`]); NaNs or
/// infinities out of place are an infinite error.
pub fn norm_err(got: &Tensor, want: &Tensor) -> f64 {
    assert_eq!(got.dims(), want.dims(), "shapes differ");
    tempra_tensor::compare::nmse(got, want).unwrap_or(f64::INFINITY)
}

/// Asserts `norm_err(got, want) <= budget` (an NMSE).
#[track_caller]
pub fn assert_close(got: &Tensor, want: &Tensor, budget: f64, what: &str) {
    let e = norm_err(got, want);
    assert!(e <= budget, "{what}: nmse {e:e} > {budget:e}");
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
/// within the NMSE budget `tol`, and checks the 1- and 2-thread results of each ISA agree bitwise.
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
