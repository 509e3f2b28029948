//! Large host blocks start on a 2 MiB boundary and, on Linux, are marked for transparent
//! huge pages; small blocks are neither (their slack stays a few bytes).

use tempra_pool::{HOST_ALIGN, HUGE_PAGE, HostMemory, Memory};

#[test]
fn blocks_of_a_huge_page_or_more_start_on_a_huge_page_boundary() {
    for bytes in [
        HUGE_PAGE,
        HUGE_PAGE + 1,
        3 * HUGE_PAGE + 4096,
        8 * HUGE_PAGE,
    ] {
        let mut block = HostMemory.allocate(bytes).unwrap();
        assert_eq!(block.as_ptr() as usize % HUGE_PAGE, 0, "{bytes} bytes");
        assert_eq!(block.size(), bytes);
        // Zeroed, and every byte writable (the rounding stayed inside the allocation).
        let all = block.as_bytes_mut();
        assert!(all.iter().step_by(4093).all(|&b| b == 0));
        all.fill(0xA5);
        assert_eq!(all[bytes - 1], 0xA5);
    }
}

#[test]
fn smaller_blocks_keep_the_cache_line_alignment() {
    // A run of small blocks: aligned to 64 bytes, and not each padded to 2 MiB (their
    // addresses are not all 2 MiB apart).
    let blocks: Vec<_> = (0..64)
        .map(|i| HostMemory.allocate(1000 + 64 * i).unwrap())
        .collect();
    assert!(
        blocks
            .iter()
            .all(|b| (b.as_ptr() as usize).is_multiple_of(HOST_ALIGN))
    );
    let spread = blocks.iter().map(|b| b.as_ptr() as usize).max().unwrap()
        - blocks.iter().map(|b| b.as_ptr() as usize).min().unwrap();
    assert!(
        spread < 64 * HUGE_PAGE,
        "small blocks spread over {spread} bytes"
    );
}

/// The `THPeligible` flag of the mapping that holds `addr`, from `/proc/self/smaps`.
#[cfg(target_os = "linux")]
fn thp_eligible(addr: usize) -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            inside = (lo..hi).contains(&addr);
            continue;
        }
        if inside && let Some(flag) = line.strip_prefix("THPeligible:") {
            return Some(flag.trim() == "1");
        }
    }
    None
}

#[cfg(target_os = "linux")]
#[test]
fn large_blocks_are_marked_for_transparent_huge_pages() {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    let Ok(mode) = mode else {
        eprintln!("skipped: this kernel has no transparent huge pages");
        return;
    };
    if mode.contains("[never]") || std::env::var("TEMPRA_HUGE_PAGES").is_ok_and(|v| v == "0") {
        eprintln!("skipped: transparent huge pages are off ({})", mode.trim());
        return;
    }
    let block = HostMemory.allocate(4 * HUGE_PAGE).unwrap();
    let eligible = thp_eligible(block.as_ptr() as usize);
    // `Some(false)` would mean the advice was not given (in `madvise` mode, the
    // default, unmarked anonymous memory is not eligible).
    assert_eq!(eligible, Some(true), "THP mode {}", mode.trim());
}
