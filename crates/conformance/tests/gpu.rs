//! The wgpu backend against the f64 oracle (with the `gpu` feature; skipped without an
//! adapter unless `REQUIRE_GPU=1`). Its host fallbacks are reported like the CPU's
//! delegations; on lavapipe (CI's adapter) they are pinned in a snapshot.

#![cfg(feature = "gpu")]

use tempra_conformance::{backends, cases, run_suite};

#[test]
fn the_gpu_meets_every_budget() {
    let target = match backends::gpu() {
        Ok(t) => t,
        Err(e) if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("REQUIRE_GPU=1 but there is no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipping the GPU conformance run: {e}");
            return;
        }
    };
    let cases = cases::all().unwrap();
    let lavapipe = target.label.contains("llvmpipe");
    let report = run_suite(&target.ctx, target.label, &cases).unwrap();
    println!("{report}");
    assert!(report.failures().is_empty(), "{report}");
    if lavapipe {
        insta::assert_snapshot!("lavapipe_handoffs", report.handoff_listing());
    }
}
