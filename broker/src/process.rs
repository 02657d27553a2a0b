//! What this process costs the machine, read from /proc: its resident
//! memory, CPU time and open files. Used by the memory alarm
//! (`queue/resource_alarm.rs`), the daemon's heap trimming and the metrics
//! endpoint (`http/`); it knows nothing of queues.

/// The process's resident set in bytes, from /proc (Linux); `None` where
/// it cannot be read.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// CPU time the process has used, user and system, in seconds, from
/// /proc/self/stat (Linux); `None` where it cannot be read.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count the fields after its closing one. utime and stime are fields
    // 14 and 15, so the 12th and 13th after it.
    let after = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = after.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    let ticks = rustix::param::clock_ticks_per_second();
    Some((user + system) as f64 / ticks as f64)
}

/// File descriptors the process has open, counted in /proc/self/fd
/// (Linux); `None` where it cannot be read.
pub fn open_files() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    // One of them is the directory handle this count reads through.
    Some((entries.count() as u64).saturating_sub(1))
}

/// The most file descriptors the process may open (its soft limit).
pub fn max_open_files() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_running_process_has_resident_memory() {
        let rss = super::resident_bytes().expect("/proc/self/statm is readable");
        assert!(rss > 1024 * 1024, "{rss} bytes");
    }

    #[test]
    fn a_running_process_has_used_cpu_and_holds_files() {
        let started = super::cpu_seconds().expect("/proc/self/stat is readable");
        let mut spin = 0u64;
        let until = std::time::Instant::now() + std::time::Duration::from_millis(30);
        while std::time::Instant::now() < until {
            spin = spin.wrapping_add(1);
        }
        let later = super::cpu_seconds().expect("/proc/self/stat is readable");
        assert!(later >= started && spin > 0, "{started} then {later}");
        let open = super::open_files().expect("/proc/self/fd is readable");
        assert!(open >= 3, "{open} open files");
        assert!(super::max_open_files().is_some_and(|max| max >= open));
    }
}
