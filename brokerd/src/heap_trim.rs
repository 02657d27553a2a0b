//! Handing freed heap back to the operating system. glibc's malloc keeps
//! what a drained queue freed resident inside its arenas: measured after
//! filling one quorum queue to 1M messages and draining it (release build,
//! depth bin), the process stayed at 110 MiB RSS; one `malloc_trim(0)`
//! brought it to 23 MiB. So a thread looks every 5 to 15 s at how much of
//! the resident memory malloc is not using, and trims when that grew by
//! more than [`trigger`] (8 MiB, or a sixteenth of the heap in use if
//! more) since the last look that trimmed: a trim walks the arenas under
//! their locks, so it runs after a release, not on a steady state.
//!
//! At 10,000 idle quorum queues a node frees ~40 MiB of small blocks
//! when its groups go quiet (tasks and streams ended): with a 32 MiB
//! trigger and looks up to 60 s apart, that came back to the system at
//! once in some runs and a minute later in others (docs/benchmarks.md,
//! "Memory per idle group, eleventh pass").
//!
//! glibc only (other C libraries: nothing to do). The one place the daemon
//! calls C directly; it knows nothing of queues (the resident size comes
//! from `broker::process`).
#![allow(unsafe_code)]

use std::time::Duration;

/// The least growth of resident bytes malloc does not use, above what
/// they were after the last trim, that starts a trim.
pub const SLACK_TRIGGER: u64 = 8 * 1024 * 1024;

/// The growth that starts a trim with `in_use` bytes of heap in use: a
/// sixteenth of it, at least [`SLACK_TRIGGER`], so a heap of gigabytes
/// (a deep queue) is not walked for every few megabytes it gives back.
pub fn trigger(in_use: u64) -> u64 {
    (in_use / 16).max(SLACK_TRIGGER)
}

/// How often it looks after a trim; each look that finds nothing to do
/// doubles the wait, up to [`PERIOD_MAX`]: `mallinfo2` walks every free
/// chunk of every arena (about 9 ms at a 3 GB heap of 10,000 idle queues,
/// 0.06% of a core at one look every 15 s).
const PERIOD: Duration = Duration::from_secs(5);
/// The longest wait between two looks.
const PERIOD_MAX: Duration = Duration::from_secs(15);

/// Start the trimming thread (a no-op where malloc is not glibc's).
pub fn spawn() -> std::io::Result<()> {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("ramqp-heap-trim".into())
        .spawn(|| {
            // Code, stacks and what cannot be trimmed count from here.
            let mut floor = slack();
            let mut period = PERIOD;
            loop {
                // A periodic look, not a wait: nothing signals it.
                std::thread::sleep(period);
                let in_use = in_use_bytes();
                let before = slack_with(in_use);
                if before > floor.saturating_add(trigger(in_use)) {
                    trim();
                    floor = slack();
                    period = PERIOD;
                    tracing::debug!(before, after = floor, "heap trimmed");
                } else {
                    floor = floor.min(before);
                    period = (period * 2).min(PERIOD_MAX);
                }
            }
        })
        .map(|_| ())
}

/// Resident bytes of the process that malloc holds but does not use (plus
/// code and stacks, a constant); 0 if unknown.
fn slack() -> u64 {
    slack_with(in_use_bytes())
}

/// The same, with the bytes in use already read.
fn slack_with(in_use: u64) -> u64 {
    broker::process::resident_bytes()
        .unwrap_or(0)
        .saturating_sub(in_use)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn in_use_bytes() -> u64 {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct by
    // value; glibc >= 2.33 (Debian 12 has 2.36).
    let info = unsafe { libc::mallinfo2() };
    // Chunks in use in the arenas plus blocks malloc mapped on their own.
    (info.uordblks as u64).saturating_add(info.hblkhd as u64)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only reads its integer argument and works under
    // glibc's own arena locks; it is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn in_use_bytes() -> u64 {
    0
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn memory_freed_between_live_blocks_is_given_back() {
        // 128 MiB in 4 KiB blocks (below the mmap threshold, so they live in
        // an arena), then seven of every eight freed: the holes (28 KiB
        // each, whole pages inside) cannot be cut off the heap's top, so
        // they stay resident until a trim.
        let mut blocks: Vec<Option<Vec<u8>>> =
            (0..32 * 1024).map(|_| Some(vec![1u8; 4096])).collect();
        for (i, block) in blocks.iter_mut().enumerate() {
            if i % 8 != 0 {
                *block = None;
            }
        }
        let before = slack();
        trim();
        let after = slack();
        assert!(
            after + 32 * 1024 * 1024 < before,
            "resident but unused: {before} before the trim, {after} after"
        );
        drop(blocks);
    }

    #[test]
    fn a_large_heap_trims_after_a_larger_release() {
        assert_eq!(trigger(0), SLACK_TRIGGER);
        assert_eq!(trigger(64 * 1024 * 1024), SLACK_TRIGGER);
        assert_eq!(trigger(3 << 30), (3 << 30) / 16);
    }
}
