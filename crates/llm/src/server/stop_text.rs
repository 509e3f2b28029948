//! `StopText`: holds back generated text while it could still be the start of a stop
//! string, and cuts the output before the first stop string that appears.

/// Text waiting to be released and the stop strings it is checked against.
#[derive(Debug, Default)]
pub(crate) struct StopText {
    stops: Vec<String>,
    held: String,
}

/// What [`StopText::push`] released.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Released {
    /// Text that can no longer be part of a stop string (or, on a stop, the text before
    /// it).
    pub(crate) text: String,
    /// A stop string appeared: the generation ends here.
    pub(crate) stopped: bool,
}

impl StopText {
    /// A filter for `stops` (empty strings are ignored).
    pub(crate) fn new(stops: Vec<String>) -> StopText {
        StopText {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    /// Adds `piece` and releases what is safe to show.
    pub(crate) fn push(&mut self, piece: &str) -> Released {
        self.held.push_str(piece);
        if let Some(at) = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            let text = self.held[..at].to_owned();
            self.held.clear();
            return Released {
                text,
                stopped: true,
            };
        }
        // Keep the longest suffix of `held` that starts some stop string.
        let mut keep_from = self.held.len();
        for s in &self.stops {
            for (i, _) in self.held.char_indices() {
                if i < keep_from && s.starts_with(&self.held[i..]) {
                    keep_from = i;
                    break;
                }
            }
        }
        let rest = self.held.split_off(keep_from);
        Released {
            text: std::mem::replace(&mut self.held, rest),
            stopped: false,
        }
    }

    /// The text still held (at the end of a generation that did not stop on a string).
    pub(crate) fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_prefixes_and_cuts_at_stops() {
        let mut s = StopText::new(vec!["END".into(), String::new(), "\n\n".into()]);
        assert_eq!(s.push("abc").text, "abc");
        let r = s.push("xE");
        assert_eq!((r.text.as_str(), r.stopped), ("x", false));
        let r = s.push("N");
        assert_eq!((r.text.as_str(), r.stopped), ("", false));
        let r = s.push("Dtail");
        assert_eq!((r.text.as_str(), r.stopped), ("", true));
        let mut s = StopText::new(vec!["END".into()]);
        assert_eq!(s.push("aEN").text, "a");
        assert_eq!(s.push("x").text, "ENx");
        assert_eq!(s.push("E").text, "");
        assert_eq!(s.finish(), "E");
        let mut s = StopText::new(vec!["\n\n".into()]);
        let r = s.push("one\n\ntwo");
        assert_eq!((r.text.as_str(), r.stopped), ("one", true));
    }
}
