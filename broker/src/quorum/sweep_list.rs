//! The node's list of the quorum groups its expiry sweep visits
//! (`node/expiry_sweep.rs`), and its "sweep now" signal.
//!
//! Why a list: the sweep used to visit every open group once a second,
//! and at 10,000 idle queues that walk over cold memory was about a sixth
//! of an idle node's CPU while almost no group had anything to remove. A
//! group is listed only while this node leads it and it may have
//! something to discard: a message with an expiry, or its drop-head limit
//! passed (`Inner::wants_sweep`); or, on any replica, while its queue is
//! empty and its segment store keeps an idle segment to give back
//! (`Inner::wants_shed`, `idle_shed.rs`). It joins when one of those
//! becomes true (an apply, a leadership gained, a policy set:
//! [`list_if_wanted`]) and leaves when a sweep finds none (`discard.rs`).
//!
//! Lock order: a group's state lock, then the list's; the list's lock is
//! held for nothing else.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

use super::state_machine::{Inner, Shared};
use crate::raft::GroupId;

/// The groups to sweep, and the signal for a sweep at once.
#[derive(Default)]
pub(crate) struct SweepList {
    groups: Mutex<HashSet<GroupId>>,
    soon: Notify,
}

impl SweepList {
    /// Raised when a group led here must drop its head now.
    pub(crate) fn soon(&self) -> &Notify {
        &self.soon
    }

    /// The groups listed now.
    pub(crate) fn listed(&self) -> Vec<GroupId> {
        self.lock().iter().copied().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<GroupId>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take `group` off the list (it is gone from the node).
    pub(crate) fn forget(&self, group: GroupId) {
        self.lock().remove(&group);
    }
}

/// A group's place on its node's list: set when the group opens.
pub(crate) type SweepSlot = OnceLock<(Arc<SweepList>, GroupId)>;

/// A replica's state on the list, kept in its `Inner`.
#[derive(Debug, Default)]
pub(crate) struct SweepMark {
    /// On the list now.
    pub(crate) listed: bool,
    /// Since when a sweep has found the queue empty with nothing applied
    /// (`Inner::published_total` then), for the idle shed.
    pub(crate) idle_since: Option<(u64, tokio::time::Instant)>,
}

impl Inner {
    /// Whether this replica may have something to discard now: it leads,
    /// and holds a message with an expiry or is past its drop-head limit.
    pub(crate) fn wants_sweep(&self) -> bool {
        self.leading
            && !self.deleted
            && (self.index.has_expiries()
                || self.dispatcher.has_expired()
                || self.past_drop_head_limit())
    }
}

/// Put the group on its node's sweep list if it wants sweeping and is not
/// listed yet. Called with the group's state locked.
pub(crate) fn list_if_wanted(shared: &Shared, inner: &mut Inner) {
    if inner.sweep.listed || !(inner.wants_sweep() || inner.wants_shed()) {
        return;
    }
    if let Some((list, group)) = shared.sweep_list.get() {
        inner.sweep.listed = true;
        list.lock().insert(*group);
    }
}

/// Take the group off its node's sweep list if it no longer wants
/// sweeping; true if it did. Called with the group's state locked.
pub(crate) fn unlist_if_done(shared: &Shared, inner: &mut Inner) -> bool {
    if inner.wants_sweep() || inner.wants_shed() {
        return false;
    }
    if let Some((list, group)) = shared.sweep_list.get() {
        list.lock().remove(group);
    }
    inner.sweep.listed = false;
    true
}
