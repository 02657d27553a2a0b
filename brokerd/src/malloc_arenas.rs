//! How many malloc arenas the daemon's threads share. glibc gives a
//! thread that finds its arena locked an arena of its own, up to eight per
//! core, and a block stays in the arena it came from: the runtime's
//! workers, the log writer and the blocking pool each leave their own
//! partly used pages. Measured with 1,000 idle quorum queues on three
//! `ramqp-brokerd` processes (`many_queues`, docs/benchmarks.md, "Memory
//! per idle group, seventh pass"): 36.1-37.8 KiB per group per node with
//! glibc's default, 34.2-34.7 with one arena (35.3-35.8 with two).
//! Small blocks come from each thread's cache first, so the one arena's
//! lock is taken only when a cache is empty or full.
//!
//! So the daemon takes one arena per runtime worker (the threads that
//! allocate on the hot path; the log writer and the blocking pool share
//! them): a node of the 3-node local cluster on 2 cores, one worker, gets
//! one; a node alone on them, two. Measured only on this 2-core machine:
//! the standard cluster A/B (`bench-compare/ab.sh`, one worker a node)
//! showed no difference its spread resolves.
//!
//! Set before the runtime starts (an arena is bound to a thread at its
//! first allocation). `MALLOC_ARENA_MAX` in the environment, glibc's own
//! setting, wins. glibc only; elsewhere nothing to do.
#![allow(unsafe_code)]

/// Limits the process to one malloc arena per runtime worker (`workers`,
/// resolved: at least 1) unless the environment sets `MALLOC_ARENA_MAX`.
/// Returns the limit it set.
pub fn limit(workers: usize) -> Option<usize> {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return None;
    }
    let arenas = workers.max(1);
    set_max(arenas).then_some(arenas)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_max(arenas: usize) -> bool {
    let Ok(arenas) = libc::c_int::try_from(arenas) else {
        return false;
    };
    // SAFETY: mallopt only reads its two integer arguments and takes
    // glibc's own lock; it returns 1 on success, 0 on a refused value.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_max(_arenas: usize) -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn glibc_takes_the_limit() {
        assert!(set_max(1), "glibc refused M_ARENA_MAX = 1");
        assert!(!set_max(usize::MAX), "a limit beyond a C int must not wrap");
    }
}
