//! Raising the process's open-file limit to what the system allows: every
//! quorum queue replica keeps its segment files open (one at least, more
//! for a deep queue), besides sockets and the log store, so the usual soft
//! limit of 1,024 would cap a node at a few hundred queues.

use rustix::process::{getrlimit, setrlimit, Resource};

/// Set the soft `RLIMIT_NOFILE` to the hard one; returns (before, after).
pub fn raise_open_files() -> std::io::Result<(Option<u64>, Option<u64>)> {
    let mut limit = getrlimit(Resource::Nofile);
    let before = limit.current;
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        setrlimit(Resource::Nofile, limit)?;
    }
    Ok((before, limit.current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_becomes_the_hard_one() {
        // Lower the soft limit first (always allowed), so raising it is seen.
        let mut lowered = getrlimit(Resource::Nofile);
        lowered.current = Some(256.min(lowered.maximum.unwrap_or(256)));
        setrlimit(Resource::Nofile, lowered).unwrap();
        let (before, after) = raise_open_files().unwrap();
        assert_eq!(before, lowered.current);
        let now = getrlimit(Resource::Nofile);
        assert_eq!(now.current, after);
        assert_eq!(now.current, now.maximum);
    }
}
