//! What this process costs the machine, read from /proc: its resident
//! memory. Used by the memory alarm (`queue/resource_alarm.rs`) and by the
//! daemon's heap trimming; it knows nothing of queues.

/// The process's resident set in bytes, from /proc (Linux); `None` where
/// it cannot be read.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_running_process_has_resident_memory() {
        let rss = super::resident_bytes().expect("/proc/self/statm is readable");
        assert!(rss > 1024 * 1024, "{rss} bytes");
    }
}
