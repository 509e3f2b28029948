//! The result of one backend's run: a row per case (its error against the oracle, its
//! budget, what the backend handed on), printable as a table.

use std::collections::BTreeMap;
use std::fmt;

use tempra_tensor::Handoffs;
use tempra_tensor::handoff::describe;

use crate::budget::Precision;

/// How a case ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Within budget.
    Pass,
    /// Ran, but the error exceeds the budget.
    OverBudget,
    /// The op (or the comparison: NaNs or infinities out of place, a wrong shape)
    /// failed; the message says how.
    Error(String),
}

/// One case on one backend.
#[derive(Clone, Debug)]
pub struct Row {
    /// `family/name`.
    pub case: String,
    /// The op family.
    pub family: &'static str,
    /// The case's kind of arithmetic.
    pub precision: Precision,
    /// Its budget.
    pub budget: f64,
    /// The NMSE against the oracle (the worst output's), when the op ran.
    pub error: Option<f64>,
    /// The calls the backend handed to another implementation while running it.
    pub handoffs: Handoffs,
    /// Pass, over budget or failed.
    pub outcome: Outcome,
}

/// Every case of the suite on one backend.
#[derive(Clone, Debug)]
pub struct Report {
    /// The label the run was given (`cpu-avx512-3t`, `wgpu: llvmpipe`, ...).
    pub backend: String,
    /// The backend's own name (`Backend::name`).
    pub backend_name: &'static str,
    /// One row per case, in the suite's order.
    pub rows: Vec<Row>,
}

impl Report {
    /// A report of `rows`.
    pub fn new(backend: String, backend_name: &'static str, rows: Vec<Row>) -> Self {
        Self {
            backend,
            backend_name,
            rows,
        }
    }

    /// The rows that did not pass.
    pub fn failures(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.outcome != Outcome::Pass)
            .collect()
    }

    /// The hand-offs of the whole run, per op.
    pub fn handoffs(&self) -> Handoffs {
        let mut total = Handoffs::new();
        for row in &self.rows {
            for (&op, &n) in &row.handoffs {
                *total.entry(op).or_default() += n;
            }
        }
        total
    }

    /// Which cases handed which ops on, one line per case that did (`case: op×n, ...`),
    /// in the suite's order: a stable listing to pin in a snapshot.
    pub fn handoff_listing(&self) -> String {
        let mut out = String::new();
        for row in self.rows.iter().filter(|r| !r.handoffs.is_empty()) {
            out.push_str(&format!("{}: {}\n", row.case, describe(&row.handoffs)));
        }
        out
    }

    /// The worst error per op family and kind of arithmetic (which fixes the budget),
    /// with the budget: the summary a run prints.
    pub fn worst(&self) -> BTreeMap<(&'static str, String), (f64, f64)> {
        let mut worst: BTreeMap<(&'static str, String), (f64, f64)> = BTreeMap::new();
        for row in &self.rows {
            let Some(e) = row.error else { continue };
            let key = (row.family, row.precision.label());
            let entry = worst.entry(key).or_insert((0.0, row.budget));
            entry.0 = entry.0.max(e);
        }
        worst
    }
}

impl fmt::Display for Report {
    /// The failures in full, then a per-family summary and the hand-offs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failures = self.failures();
        writeln!(
            f,
            "conformance on {} ({}): {} cases, {} passed, {} failed",
            self.backend,
            self.backend_name,
            self.rows.len(),
            self.rows.len() - failures.len(),
            failures.len()
        )?;
        for row in &failures {
            match &row.outcome {
                Outcome::OverBudget => writeln!(
                    f,
                    "  FAIL {}: nmse {:.3e} > budget {:.1e} ({})",
                    row.case,
                    row.error.unwrap_or(f64::NAN),
                    row.budget,
                    row.precision.label()
                )?,
                Outcome::Error(e) => writeln!(f, "  FAIL {}: {e}", row.case)?,
                Outcome::Pass => {}
            }
        }
        writeln!(
            f,
            "  {:<24} {:<16} {:>11} {:>8}",
            "family", "arithmetic", "worst nmse", "budget"
        )?;
        for ((family, precision), (e, b)) in self.worst() {
            writeln!(f, "  {family:<24} {precision:<16} {e:>11.2e} {b:>8.0e}")?;
        }
        writeln!(f, "  hand-offs: {}", describe(&self.handoffs()))
    }
}
