//! Durations on the command line: seconds (`10`, `0.5`) or with a unit (`250ms`, `10s`,
//! `2m`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration argument; shown in help as seconds (`10s`, `0.5s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DurationArg(pub(crate) Duration);

impl fmt::Display for DurationArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0.as_secs_f64())
    }
}

impl FromStr for DurationArg {
    type Err = String;

    fn from_str(text: &str) -> Result<DurationArg, String> {
        parse_duration(text).map(DurationArg)
    }
}

/// Parses `text` as a duration.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| {
        format!("`{text}` is not a duration (seconds like `10` or `0.5`, or `250ms`, `10s`, `2m`)")
    })?;
    let seconds = value * scale;
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(format!(
            "`{text}` is not a duration between 0 and 10^9 seconds"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_units() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "ten", "-1", "1h", "NaN", "inf"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let shown = DurationArg(Duration::from_millis(1500)).to_string();
        assert_eq!(shown, "1.5s");
        assert_eq!(shown.parse(), Ok(DurationArg(Duration::from_millis(1500))));
    }
}
