//! What a replica of an empty, idle quorum queue gives back, and when.
//!
//! Why: a follower keeps every body it applies in its segment files
//! (`bodies.rs`), and the segment store keeps its small active segment
//! when its last record is released, so that a shallow queue does not
//! create and delete a file per message. A queue used once and then left
//! idle therefore kept, in every replica that paged it, an open file and
//! ~0.4 KiB of segment state for as long as it lived: at 10,000 such
//! queues, most of a node's groups. Now the node's sweep
//! (`sweep_list.rs`, `node/expiry_sweep.rs`) has the store give that
//! segment back once the queue has been empty, with no message applied,
//! for [`SHED_AFTER`]: never per message, and a busy queue is left alone.
//!
//! Must not know: consumers, the log, or how the store keeps its files.

use std::time::Duration;

use tokio::time::Instant;

use super::state_machine::Inner;

/// How long a queue stays empty, with no message applied, before its
/// replica gives back its idle segment.
pub(crate) const SHED_AFTER: Duration = Duration::from_secs(2);

impl Inner {
    /// Whether this replica has something to give back once idle: its
    /// queue is empty and its segment store keeps an idle segment.
    pub(crate) fn wants_shed(&self) -> bool {
        !self.deleted
            && self.index.len() == 0
            && self
                .store
                .as_ref()
                .is_some_and(|store| store.holds_idle_segment())
    }

    /// A sweep reached this replica at `now`: the first finding of an
    /// empty queue marks the time, and a later one, with no message
    /// applied since and [`SHED_AFTER`] gone by, sheds. A failure to
    /// delete the file leaves the store refusing changes (it is poisoned,
    /// as after any failed write), so the group's next apply fails and
    /// stops it: never a replica that serves on with unknown files.
    pub(crate) fn shed_when_idle(&mut self, queue: &str, now: Instant) {
        if !self.wants_shed() {
            self.sweep.idle_since = None;
            return;
        }
        match self.sweep.idle_since {
            Some((applied, since)) if applied == self.published_total => {
                if now.saturating_duration_since(since) < SHED_AFTER {
                    return;
                }
                self.sweep.idle_since = None;
                if let Some(Err(error)) = self.store.as_mut().map(|store| store.shed_idle()) {
                    tracing::error!(queue, %error, "quorum queue: giving back an idle segment failed");
                }
            }
            _ => self.sweep.idle_since = Some((self.published_total, now)),
        }
    }
}
