//! `tempra-conformance`: runs the conformance suite on one backend and prints its report
//! (failures, the worst error per op family against its budget, the hand-offs); exits 1
//! when a case fails.
//!
//! ```text
//! tempra-conformance [--backend reference|cpu|gpu] [--isa ISA] [--threads N] [--list]
//! ```

use std::process::ExitCode;

use tempra_conformance::{ConformanceError, backends, cases, run_suite};

const USAGE: &str =
    "usage: tempra-conformance [--backend reference|cpu|gpu] [--isa ISA] [--threads N] [--list]";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(passed) => {
            if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("tempra-conformance: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<bool, String> {
    let mut backend = "cpu".to_string();
    let mut isa = None;
    let mut threads = 2usize;
    let mut list = false;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--backend" => backend = value("--backend")?,
            "--isa" => {
                let name = value("--isa")?;
                isa = Some(name.parse().map_err(|e| format!("--isa {name}: {e}"))?);
            }
            "--threads" => {
                let n = value("--threads")?;
                threads = n
                    .parse()
                    .ok()
                    .filter(|&t| t > 0)
                    .ok_or(format!("--threads {n}: not a positive number"))?;
            }
            "--list" => list = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(true);
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let cases = cases::all().map_err(|e| e.to_string())?;
    if list {
        for case in &cases {
            println!("{}\t{}", case.id(), case.precision.label());
        }
        return Ok(true);
    }
    let target = match backend.as_str() {
        "reference" => backends::reference(),
        "cpu" => backends::cpu(isa, threads).map_err(|e| e.to_string())?,
        "gpu" => gpu_target()?,
        other => return Err(format!("unknown backend {other:?}\n{USAGE}")),
    };
    let report = run_suite(&target.ctx, target.label, &cases)
        .map_err(|e: ConformanceError| e.to_string())?;
    print!("{report}");
    Ok(report.failures().is_empty())
}

#[cfg(feature = "gpu")]
fn gpu_target() -> Result<backends::Target, String> {
    backends::gpu().map_err(|e| e.to_string())
}

#[cfg(not(feature = "gpu"))]
fn gpu_target() -> Result<backends::Target, String> {
    Err("this build has no GPU backend: build with `--features gpu`".into())
}
