//! Named crash points for the crash tests: places in the durable paths
//! (snapshot, compaction, snapshot install) where a test can have the
//! process killed at exactly that step, to prove the files on disk are
//! recoverable from there.
//!
//! Nothing is armed unless the embedding program calls [`arm`] (the daemon
//! does when `RAMQP_CRASH_AT` names a point; it is for tests only). The
//! action is the program's: `ramqp-brokerd` sends itself SIGKILL, so no
//! destructor, flush or fsync runs after the point. An unarmed point costs
//! one atomic load, and the points sit on per-snapshot paths, not per
//! message.
//!
//! This module knows no queue, file or Raft type: only names.

use std::sync::OnceLock;

/// Every crash point, with the step it interrupts.
pub const POINTS: &[(&str, &str)] = &[
    (
        SNAPSHOT_SEGMENTS_SYNCED,
        "a snapshot's segments are fsynced, its file not yet written",
    ),
    (
        SNAPSHOT_RECORDED,
        "a snapshot file is durable, the log not yet purged up to it",
    ),
    (
        COMPACTION_COPIED,
        "compacted copies are fsynced under temporary names, not renamed",
    ),
    (
        COMPACTION_RENAMED,
        "compacted segments are renamed into place, no snapshot names them",
    ),
    (
        INSTALL_STAGED,
        "a follower has paged a streamed snapshot into its new segments",
    ),
    (
        INSTALL_RECORDED,
        "a follower's new snapshot file is durable, the old generation remains",
    ),
];

/// See [`POINTS`].
pub const SNAPSHOT_SEGMENTS_SYNCED: &str = "snapshot-segments-synced";
/// See [`POINTS`].
pub const SNAPSHOT_RECORDED: &str = "snapshot-recorded";
/// See [`POINTS`].
pub const COMPACTION_COPIED: &str = "compaction-copied";
/// See [`POINTS`].
pub const COMPACTION_RENAMED: &str = "compaction-renamed";
/// See [`POINTS`].
pub const INSTALL_STAGED: &str = "install-staged";
/// See [`POINTS`].
pub const INSTALL_RECORDED: &str = "install-recorded";

struct Armed {
    point: &'static str,
    action: fn(&'static str),
}

static ARMED: OnceLock<Armed> = OnceLock::new();

/// [`arm`] was given a name that is not in [`POINTS`], or a point was
/// already armed in this process.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    /// The name is not a crash point.
    #[error("unknown crash point {0:?} (known: {known})", known = known())]
    Unknown(String),
    /// One point per process; this one was armed first.
    #[error("crash point {0:?} is already armed")]
    AlreadyArmed(&'static str),
}

fn known() -> String {
    POINTS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Run `action` when the process reaches the crash point `name` (the first
/// time; `action` is expected not to return).
pub fn arm(name: &str, action: fn(&'static str)) -> Result<(), ArmError> {
    let point = POINTS
        .iter()
        .map(|(known, _)| *known)
        .find(|known| *known == name)
        .ok_or_else(|| ArmError::Unknown(name.to_string()))?;
    ARMED
        .set(Armed { point, action })
        .map_err(|_| ArmError::AlreadyArmed(ARMED.get().map_or(point, |armed| armed.point)))
}

/// The process passes the crash point `name`.
pub(crate) fn reached(name: &'static str) {
    if let Some(armed) = ARMED.get() {
        if armed.point == name {
            (armed.action)(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_constant_is_listed_once() {
        let names = [
            SNAPSHOT_SEGMENTS_SYNCED,
            SNAPSHOT_RECORDED,
            COMPACTION_COPIED,
            COMPACTION_RENAMED,
            INSTALL_STAGED,
            INSTALL_RECORDED,
        ];
        assert_eq!(names.len(), POINTS.len());
        for name in names {
            assert_eq!(POINTS.iter().filter(|(n, _)| *n == name).count(), 1);
        }
    }

    #[test]
    fn an_unknown_name_is_refused() {
        // The process-wide slot is left unarmed: only a refusal is tried.
        let error = arm("no-such-point", |_| {}).unwrap_err();
        assert!(error.to_string().contains("snapshot-recorded"), "{error}");
    }
}
