//! Running the `tempra` binary in the CLI tests: one copy of the helpers every
//! `cli_*.rs` test uses.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `tempra args` in `dir`.
pub fn tempra(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tempra"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `out`'s stdout, after checking the command succeeded.
pub fn stdout_of(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `tempra args`, checks it succeeded and returns its output.
pub fn ok(dir: &Path, args: &[&str]) -> Output {
    let out = tempra(dir, args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `tempra args`, checks it succeeded and returns its stdout.
pub fn succeeds(dir: &Path, args: &[&str]) -> String {
    stdout_of(ok(dir, args))
}

/// Runs `tempra args`; checks the failure is one clean line (besides a debug build's
/// warning) starting `error: ` and containing `expect`, and no panic.
pub fn fails(dir: &Path, args: &[&str], expect: &str) {
    let out = tempra(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("warning: a debug build"))
        .collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line:\n{stderr}");
    assert!(lines[0].starts_with("error: "), "{args:?}: {stderr}");
    assert!(
        lines[0].contains(expect),
        "{args:?}: `{expect}` not in: {stderr}"
    );
}
