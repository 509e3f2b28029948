//! The process's resident set size from `/proc/self/status` (Linux; `None` elsewhere).

/// `VmRSS` (resident now) in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_field("VmRSS:")
}

/// `VmHWM` (the peak resident set) in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_field("VmHWM:")
}

fn status_field(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib_field(&text, key)
}

/// The value of a `Key:   1234 kB` line of `text`, in bytes.
fn parse_kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_status_line() {
        let text = "Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(parse_kib_field(text, "VmRSS:"), Some(1024 * 1024));
        assert_eq!(parse_kib_field(text, "VmHWM:"), Some(2048 * 1024));
        assert_eq!(parse_kib_field(text, "VmSwap:"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_resident_set() {
        let rss = rss_bytes().unwrap();
        assert!(rss > 0);
        assert!(peak_rss_bytes().unwrap() >= rss);
    }
}
