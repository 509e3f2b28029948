//! `cargo xtask leak-check`: memory discipline, measured. Runs the memory harness
//! (`crates/memory-harness`, release build) and the pool, tensor and CPU-backend test
//! binaries (release builds, small sizes) under valgrind memcheck, prints one table
//! (check, figure, limit, pass/fail) and fails when any row fails.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    check: String,
    figure: String,
    limit: String,
    pass: bool,
    /// A missed limit the harness lists as a known exception (with its reason in the
    /// note); it does not fail the run.
    exception: bool,
    note: String,
}

impl Row {
    /// A row from one of the harness's JSON lines.
    fn from_json_line(line: &str) -> Result<Row> {
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("the harness printed a line that is not JSON: {line}"))?;
        let text = |key: &str| -> Result<String> {
            v.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .with_context(|| format!("harness line without a string `{key}`: {line}"))
        };
        Ok(Row {
            check: text("check")?,
            figure: text("figure")?,
            limit: text("limit")?,
            pass: v
                .get("pass")
                .and_then(Value::as_bool)
                .with_context(|| format!("harness line without a boolean `pass`: {line}"))?,
            exception: v.get("exception").and_then(Value::as_bool).unwrap_or(false),
            note: text("note")?,
        })
    }

    fn failed(check: impl Into<String>, figure: impl Into<String>, note: impl Into<String>) -> Row {
        Row {
            check: check.into(),
            figure: figure.into(),
            limit: "must succeed".into(),
            pass: false,
            exception: false,
            note: note.into(),
        }
    }
}

/// A package whose test binaries run under valgrind, with the knobs that keep them small.
struct ValgrindTarget {
    package: &'static str,
    /// Environment for every binary of the package.
    env: &'static [(&'static str, &'static str)],
    /// `(binary, test name)` pairs passed to libtest's `--skip` (too slow under valgrind,
    /// with the reason in a comment).
    skip: &'static [(&'static str, &'static str)],
}

/// What runs under valgrind. Proptest cases and the pool's stress loop are cut to sizes
/// memcheck finishes in seconds.
const VALGRIND_TARGETS: &[ValgrindTarget] = &[
    ValgrindTarget {
        package: "tempra-pool",
        env: &[("TEMPRA_STRESS_OPS", "2000"), ("PROPTEST_CASES", "16")],
        skip: &[],
    },
    ValgrindTarget {
        package: "tempra-tensor",
        env: &[("PROPTEST_CASES", "16")],
        skip: &[],
    },
    ValgrindTarget {
        package: "tempra-backend-cpu",
        env: &[("PROPTEST_CASES", "16")],
        // Large sizes to make the workers split the work: minutes under memcheck (it
        // dominated the attention binary's run); the same kernels run at small sizes in
        // the binaries' other tests.
        skip: &[
            ("attention", "threads_split_large_work"),
            // Minutes under memcheck; `blocked_prefill_tiles` runs the same blocked
            // kernel (partial panels, every cache layout) at small sizes.
            ("attention", "blocked_prefill_shapes"),
            (
                "matmul_reference",
                "threaded_and_single_threaded_agree_bitwise",
            ),
        ],
    },
];

/// The valgrind command line the issue fixes.
const VALGRIND_ARGS: &[&str] = &[
    "--tool=memcheck",
    "--quiet",
    "--error-exitcode=1",
    "--leak-check=full",
    "--errors-for-leak-kinds=definite",
    "--suppressions=crates/pool/valgrind.supp",
];

fn cargo_command() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Options of `cargo xtask leak-check`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    no_valgrind: bool,
    no_harness: bool,
    harness_args: Vec<String>,
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--no-valgrind" => options.no_valgrind = true,
            "--no-harness" => options.no_harness = true,
            "--only" => {
                let name = it.next().context("--only needs a scenario name")?;
                options.harness_args.extend(["--only".into(), name.clone()]);
            }
            "--help" | "-h" => {
                println!(
                    "cargo xtask leak-check [--only SCENARIO]... [--no-harness] [--no-valgrind]\n\n\
                     Runs the memory harness (release build; scenarios decode, train, teardown,\n\
                     repeat, gpu) and the pool, tensor and CPU-backend tests under valgrind\n\
                     memcheck; prints a table and fails when any check fails."
                );
                std::process::exit(0);
            }
            other => bail!("unknown leak-check argument `{other}` (see --help)"),
        }
    }
    Ok(options)
}

/// Runs `cargo xtask leak-check`.
pub(crate) fn leak_check(args: &[String]) -> Result<()> {
    let options = parse_options(args)?;
    let start = Instant::now();
    let mut rows = Vec::new();
    if !options.no_harness {
        rows.extend(harness_rows(&options.harness_args)?);
    }
    if !options.no_valgrind {
        rows.extend(valgrind_rows()?);
    }
    print!("{}", render_table(&rows));
    let failed = rows.iter().filter(|r| !r.pass).count();
    let exceptions = rows.iter().filter(|r| r.exception).count();
    println!(
        "leak-check: {} checks, {failed} failed, {exceptions} known exception(s), {:.0}s",
        rows.len(),
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        bail!("leak-check: {failed} check(s) failed");
    }
    Ok(())
}

/// Builds and runs the harness; its JSON lines become rows.
fn harness_rows(extra: &[String]) -> Result<Vec<Row>> {
    let started = Instant::now();
    let output = cargo_command()
        .args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "tempra-memory-harness",
            "--",
        ])
        .args(extra)
        .stderr(Stdio::inherit())
        .output()
        .context("starting cargo run for the memory harness")?;
    println!(
        "xtask: memory harness took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut rows = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(Row::from_json_line)
        .collect::<Result<Vec<_>>>()?;
    if !output.status.success() {
        rows.push(Row::failed(
            "harness",
            format!("{}", output.status),
            "the memory harness did not finish (its stderr is above)",
        ));
    }
    Ok(rows)
}

/// A test executable cargo built.
#[derive(Debug, PartialEq, Eq)]
struct TestBinary {
    name: String,
    path: String,
}

/// The test executables in `cargo test --no-run --message-format=json` output.
fn test_binaries(json_lines: &str) -> Vec<TestBinary> {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["profile"]["test"] == true)
        .filter_map(|v| {
            Some(TestBinary {
                name: v["target"]["name"].as_str()?.replace('-', "_"),
                path: v["executable"].as_str()?.to_owned(),
            })
        })
        .collect()
}

/// Builds each target's tests (release) and runs every binary under memcheck.
fn valgrind_rows() -> Result<Vec<Row>> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Ok(vec![Row::failed(
            "valgrind",
            "not installed",
            "install Debian's valgrind (.ci/run does)",
        )]);
    }
    let mut rows = Vec::new();
    for target in VALGRIND_TARGETS {
        let build = cargo_command()
            .args([
                "test",
                "--release",
                "--no-run",
                "--message-format=json",
                "-p",
                target.package,
            ])
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("building {}'s tests", target.package))?;
        if !build.status.success() {
            rows.push(Row::failed(
                format!("valgrind.{}", target.package),
                "build failed",
                "cargo test --release --no-run failed",
            ));
            continue;
        }
        for binary in test_binaries(&String::from_utf8_lossy(&build.stdout)) {
            rows.push(run_under_valgrind(target, &binary)?);
        }
    }
    Ok(rows)
}

fn run_under_valgrind(target: &ValgrindTarget, binary: &TestBinary) -> Result<Row> {
    let mut command = Command::new("valgrind");
    command.args(VALGRIND_ARGS).arg(&binary.path);
    command.args(["--test-threads", "2"]);
    for (bin, test) in target.skip {
        if *bin == binary.name {
            command.args(["--skip", test]);
        }
    }
    command.envs(target.env.iter().copied());
    let started = Instant::now();
    let output = command
        .output()
        .with_context(|| format!("running valgrind on {}", binary.path))?;
    let seconds = started.elapsed().as_secs_f64();
    let check = format!(
        "valgrind.{}.{}",
        target.package.trim_start_matches("tempra-"),
        binary.name
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary = stdout_summary(&String::from_utf8_lossy(&output.stdout));
    let row = match output.status.code() {
        Some(0) => Row {
            check,
            figure: "0 errors".into(),
            limit: "0 errors, 0 definite leaks".into(),
            pass: true,
            exception: false,
            note: format!("{summary}; {seconds:.0}s"),
        },
        Some(1) => {
            std::io::stderr().write_all(&output.stderr)?;
            Row {
                check,
                figure: "memcheck errors".into(),
                limit: "0 errors, 0 definite leaks".into(),
                pass: false,
                exception: false,
                note: format!("see valgrind's report above; {summary}"),
            }
        }
        code => {
            std::io::stderr().write_all(stderr.as_bytes())?;
            Row::failed(
                check,
                format!("exit {code:?}"),
                format!("the tests failed under valgrind; {summary}"),
            )
        }
    };
    Ok(row)
}

/// libtest's `test result: ...` line, or a placeholder.
fn stdout_summary(stdout: &str) -> String {
    stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("test result:"))
        .map_or_else(
            || "no test summary".into(),
            |l| l.trim_start_matches("test result: ").to_owned(),
        )
}

/// The table: aligned columns check, figure, limit, result, note.
fn render_table(rows: &[Row]) -> String {
    let headers = ["check", "figure", "limit", "result"];
    let mut widths = headers.map(str::len);
    for r in rows {
        for (w, cell) in
            widths
                .iter_mut()
                .zip([&r.check, &r.figure, &r.limit, &"EXCEPTION".to_string()])
        {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 4], note: &str| {
        for (cell, w) in cells.iter().zip(widths) {
            out.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(note);
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(headers, "note");
    for r in rows {
        let result = match (r.pass, r.exception) {
            (false, _) => "FAIL",
            (true, true) => "EXCEPTION",
            (true, false) => "pass",
        };
        line([&r.check, &r.figure, &r.limit, result], &r.note);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_harness_line() {
        let row = Row::from_json_line(
            r#"{"check":"decode.tiny.pool_misses","figure":"0","limit":"<= 0","pass":true,"note":"32 tokens"}"#,
        )
        .unwrap();
        assert_eq!(row.check, "decode.tiny.pool_misses");
        assert!(row.pass && !row.exception);
        assert_eq!(row.note, "32 tokens");
    }

    #[test]
    fn rejects_malformed_lines() {
        assert!(Row::from_json_line("memory-harness: decode").is_err());
        assert!(Row::from_json_line(r#"{"check":"x","figure":"0","limit":"","note":""}"#).is_err());
    }

    #[test]
    fn table_aligns_and_marks_failures() {
        let rows = [
            Row {
                check: "a".into(),
                figure: "0".into(),
                limit: "<= 0".into(),
                pass: true,
                exception: false,
                note: String::new(),
            },
            Row::failed("long.check.name", "exit 101", "tests failed"),
            Row {
                check: "b".into(),
                figure: "3.39".into(),
                limit: "< 2.00".into(),
                pass: true,
                exception: true,
                note: "a reason".into(),
            },
        ];
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[3].contains("EXCEPTION") && lines[3].ends_with("a reason"));
        assert!(lines[0].starts_with("check"));
        assert!(lines[1].contains("pass"));
        assert!(lines[2].contains("FAIL") && lines[2].ends_with("tests failed"));
        let col = |l: &str| l.find("<= 0").or_else(|| l.find("must succeed"));
        assert_eq!(col(lines[1]), col(lines[2]));
    }

    #[test]
    fn finds_test_executables_in_cargo_json() {
        let json = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"stress","kind":["test"]},"profile":{"test":true},"executable":"/t/stress-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"tempra-pool","kind":["lib"]},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            test_binaries(json),
            [TestBinary {
                name: "stress".into(),
                path: "/t/stress-1".into()
            }]
        );
    }

    #[test]
    fn options_parse() {
        let o = parse_options(&["--no-valgrind".into(), "--only".into(), "gpu".into()]).unwrap();
        assert!(o.no_valgrind && !o.no_harness);
        assert_eq!(o.harness_args, ["--only", "gpu"]);
        assert!(parse_options(&["--bogus".into()]).is_err());
    }

    #[test]
    fn summary_line_is_found() {
        let out = "running 3 tests\ntest result: ok. 3 passed; 0 failed\n";
        assert_eq!(stdout_summary(out), "ok. 3 passed; 0 failed");
        assert_eq!(stdout_summary(""), "no test summary");
    }
}
