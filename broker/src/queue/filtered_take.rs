//! How the dispatcher finds a message for a consumer with a filter,
//! without rescanning the queue: a consumer remembers the id of the last
//! waiting (never delivered) message it tested, and its next attempt
//! starts after it. Waiting messages only leave and new ones come in at
//! the back with higher ids, and whether a message matches never changes,
//! so each never-delivered message is tested at most once per filtered
//! consumer while it waits. Messages that came back from consumers
//! (released, modified, their consumer gone) are tested again at each
//! attempt; there are at most as many as were out with consumers.
//!
//! Unfiltered consumers never come here, so the queue's FIFO order for
//! them is untouched: a message a filter passes over stays where it was.
//!
//! It must not know how a filter decides (`filter/`).

use std::collections::{BTreeMap, VecDeque};

use super::dispatch::Entry;
use super::filter::MessageFilter;
use super::message::MessageId;
use super::ConsumerId;

/// The oldest message `consumer` may take and `filter` matches, removed
/// from the queue; `scanned` is the consumer's cursor (see above).
pub(super) fn take_matching(
    returned: &mut BTreeMap<MessageId, Entry>,
    ready: &mut VecDeque<Entry>,
    consumer: ConsumerId,
    filter: &MessageFilter,
    scanned: &mut Option<MessageId>,
) -> Option<Entry> {
    let takes = |e: &Entry| !e.excluded.contains(&consumer) && filter.matches(&e.message);
    if let Some(id) = returned.iter().find(|(_, e)| takes(e)).map(|(id, _)| *id) {
        return returned.remove(&id);
    }
    // `ready` is in increasing id order: start after the cursor.
    let start = scanned.map_or(0, |last| ready.partition_point(|e| e.id <= last));
    for index in start..ready.len() {
        let entry = &ready[index];
        *scanned = Some(entry.id);
        if takes(entry) {
            return ready.remove(index);
        }
    }
    None
}
