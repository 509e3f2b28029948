//! The CPU backend on every ISA this machine runs (the scalar kernels always), on 1 and
//! 3 threads (more tasks than the 2-core CI machine has cores), against the f64 oracle.
//! Its delegations to the reference kernels are the same on every ISA and thread count
//! and are pinned in a snapshot: a kernel that starts or stops delegating shows up there.

use tempra_conformance::{backends, cases, run_suite};

#[test]
fn every_cpu_configuration_meets_every_budget() {
    let cases = cases::all().unwrap();
    let mut listing: Option<(String, String)> = None;
    let mut failed = Vec::new();
    for target in backends::cpus(&[1, 3]).unwrap() {
        let report = run_suite(&target.ctx, target.label.clone(), &cases).unwrap();
        println!("{report}");
        if !report.failures().is_empty() {
            failed.push(report.to_string());
        }
        let this = report.handoff_listing();
        match &listing {
            Some((first, text)) => assert_eq!(
                &this, text,
                "{} hands on other ops than {first}",
                target.label
            ),
            None => listing = Some((target.label, this)),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let (_, text) = listing.expect("at least the scalar configuration");
    insta::assert_snapshot!("cpu_handoffs", text);
}
