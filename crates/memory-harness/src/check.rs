//! `Check`: one measured figure, its limit and whether it passes, printed as a JSON line
//! that `cargo xtask leak-check` reads and tabulates.

use serde_json::json;

/// How a figure is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A count (allocations, misses, buffers).
    Count,
    /// Bytes, shown in B, KiB or MiB.
    Bytes,
    /// A ratio (allocations per op).
    Ratio,
}

/// What a figure must satisfy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// `figure <= bound`.
    AtMost(f64),
    /// `|figure| <= bound` (a growth that may be negative).
    Within(f64),
    /// `figure < bound`.
    Below(f64),
    /// Reported only (e.g. a reserved size); always passes.
    Info,
    /// Not measured, with the reason (e.g. no GPU adapter); passes unless required.
    Skipped {
        /// Whether the environment requires this check (then a skip fails).
        required: bool,
    },
}

/// One row of the leak-check table.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The check's name, `scenario.model.what`.
    pub name: String,
    /// The measured figure.
    pub figure: f64,
    /// How the figure is shown.
    pub unit: Unit,
    /// Its limit.
    pub limit: Limit,
    /// Context: how it was measured, or the reason for a skip.
    pub note: String,
    /// A known, written-down exception: why the figure may miss its limit for now. The
    /// limit stays as it is; a missed limit shows as an exception, not a pass.
    pub exception: Option<String>,
}

/// A row's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The figure meets its limit.
    Pass,
    /// The figure misses its limit.
    Fail,
    /// The figure misses its limit, for a reason the check names.
    Exception,
}

impl Check {
    /// A check of `figure` against `limit`.
    pub fn new(name: impl Into<String>, figure: f64, unit: Unit, limit: Limit) -> Self {
        Self {
            name: name.into(),
            figure,
            unit,
            limit,
            note: String::new(),
            exception: None,
        }
    }

    /// A reported figure without a limit.
    pub fn info(name: impl Into<String>, figure: f64, unit: Unit) -> Self {
        Self::new(name, figure, unit, Limit::Info)
    }

    /// A check that could not run here, with the reason.
    pub fn skipped(name: impl Into<String>, required: bool, reason: impl Into<String>) -> Self {
        Self::new(name, 0.0, Unit::Count, Limit::Skipped { required }).with_note(reason)
    }

    /// The same check with a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// The same check with a known exception and its reason.
    pub fn with_exception(mut self, reason: impl Into<String>) -> Self {
        self.exception = Some(reason.into());
        self
    }

    /// Pass, fail, or a missed limit covered by the check's exception.
    pub fn outcome(&self) -> Outcome {
        match (self.passes(), &self.exception) {
            (true, _) => Outcome::Pass,
            (false, Some(_)) => Outcome::Exception,
            (false, None) => Outcome::Fail,
        }
    }

    /// Whether the figure satisfies the limit.
    pub fn passes(&self) -> bool {
        match self.limit {
            Limit::AtMost(bound) => self.figure <= bound,
            Limit::Within(bound) => self.figure.abs() <= bound,
            Limit::Below(bound) => self.figure < bound,
            Limit::Info => true,
            Limit::Skipped { required } => !required,
        }
    }

    /// The figure as shown in the table.
    pub fn figure_text(&self) -> String {
        match self.limit {
            Limit::Skipped { .. } => "skipped".into(),
            _ => format_value(self.figure, self.unit),
        }
    }

    /// The limit as shown in the table.
    pub fn limit_text(&self) -> String {
        match self.limit {
            Limit::AtMost(b) => format!("<= {}", format_value(b, self.unit)),
            Limit::Within(b) => format!("within ±{}", format_value(b, self.unit)),
            Limit::Below(b) => format!("< {}", format_value(b, self.unit)),
            Limit::Info => "(reported)".into(),
            Limit::Skipped { required: true } => "required".into(),
            Limit::Skipped { required: false } => "-".into(),
        }
    }

    /// The JSON line the harness prints for this check: `pass` is false only for a
    /// failure; an exception is `pass: true` with `exception` holding its reason.
    pub fn to_json_line(&self) -> String {
        let outcome = self.outcome();
        let note = match (outcome, &self.exception) {
            (Outcome::Exception, Some(reason)) if self.note.is_empty() => reason.clone(),
            (Outcome::Exception, Some(reason)) => format!("{reason} ({})", self.note),
            _ => self.note.clone(),
        };
        json!({
            "check": self.name,
            "figure": self.figure_text(),
            "limit": self.limit_text(),
            "pass": outcome != Outcome::Fail,
            "exception": outcome == Outcome::Exception,
            "note": note,
        })
        .to_string()
    }
}

/// `value` in `unit`: counts as integers, ratios with two decimals, bytes in B/KiB/MiB.
pub fn format_value(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Count => format!("{value:.0}"),
        Unit::Ratio => format!("{value:.2}"),
        Unit::Bytes => {
            let abs = value.abs();
            if abs >= 1024.0 * 1024.0 {
                format!("{:.2} MiB", value / (1024.0 * 1024.0))
            } else if abs >= 1024.0 {
                format!("{:.1} KiB", value / 1024.0)
            } else {
                format!("{value:.0} B")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_pass_and_fail_at_their_bounds() {
        let c = |figure, limit| Check::new("x", figure, Unit::Count, limit);
        assert!(c(0.0, Limit::AtMost(0.0)).passes());
        assert!(!c(1.0, Limit::AtMost(0.0)).passes());
        assert!(c(-64.0, Limit::Within(64.0)).passes());
        assert!(!c(-65.0, Limit::Within(64.0)).passes());
        assert!(c(1.99, Limit::Below(2.0)).passes());
        assert!(!c(2.0, Limit::Below(2.0)).passes());
        assert!(c(1e12, Limit::Info).passes());
        assert!(Check::skipped("gpu", false, "no adapter").passes());
        assert!(!Check::skipped("gpu", true, "no adapter").passes());
    }

    #[test]
    fn values_format_by_unit() {
        assert_eq!(format_value(3.0, Unit::Count), "3");
        assert_eq!(format_value(1.234, Unit::Ratio), "1.23");
        assert_eq!(format_value(512.0, Unit::Bytes), "512 B");
        assert_eq!(format_value(-2048.0, Unit::Bytes), "-2.0 KiB");
        assert_eq!(format_value(3.0 * 1024.0 * 1024.0, Unit::Bytes), "3.00 MiB");
    }

    #[test]
    fn json_line_carries_the_row() {
        let line = Check::new(
            "decode.tiny.pool_misses",
            2.0,
            Unit::Count,
            Limit::AtMost(0.0),
        )
        .with_note("after 4 warm-up tokens")
        .to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["check"], "decode.tiny.pool_misses");
        assert_eq!(v["figure"], "2");
        assert_eq!(v["limit"], "<= 0");
        assert_eq!(v["pass"], false);
        assert_eq!(v["note"], "after 4 warm-up tokens");
    }

    #[test]
    fn an_exception_keeps_the_limit_and_is_flagged() {
        let over = Check::new("train.x", 3.4, Unit::Ratio, Limit::Below(2.0))
            .with_exception("tape nodes box their rules");
        assert!(!over.passes());
        assert_eq!(over.outcome(), Outcome::Exception);
        let v: serde_json::Value = serde_json::from_str(&over.to_json_line()).unwrap();
        assert_eq!(
            (v["pass"].as_bool(), v["exception"].as_bool()),
            (Some(true), Some(true))
        );
        assert_eq!(v["limit"], "< 2.00");
        assert_eq!(v["note"], "tape nodes box their rules");
        // Within its limit, an exception is not needed: a plain pass.
        let under = Check::new("train.y", 1.0, Unit::Ratio, Limit::Below(2.0)).with_exception("r");
        assert_eq!(under.outcome(), Outcome::Pass);
        // Without one, a missed limit fails.
        let plain = Check::new("train.z", 3.0, Unit::Ratio, Limit::Below(2.0));
        assert_eq!(plain.outcome(), Outcome::Fail);
    }

    #[test]
    fn a_skip_shows_its_state() {
        let c = Check::skipped("gpu.live_buffers", false, "skipped: no adapter");
        assert_eq!(c.figure_text(), "skipped");
        assert_eq!(c.limit_text(), "-");
    }
}
