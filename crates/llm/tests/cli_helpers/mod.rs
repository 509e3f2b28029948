//! Running the `tempra` binary in the CLI tests: one copy of the helpers every
//! `cli_*.rs` test uses.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};

/// A small random llama model (vocabulary 300) written to `dir/model.gguf`.
pub fn random_model_file(dir: &Path) -> PathBuf {
    let shape = ModelShape::parse("dim=64,layers=2,heads=4,kv_heads=2,ffn=128,vocab=300").unwrap();
    let bytes =
        write_random_model(&RandomModelSpec::llama(shape).with_seed(5), Vec::new()).unwrap();
    let path = dir.join("model.gguf");
    std::fs::write(&path, bytes).unwrap();
    path
}

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
