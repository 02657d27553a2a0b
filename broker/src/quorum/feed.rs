//! The leader's feed from the replicated index into its dispatcher: the
//! dispatcher holds a window of the oldest messages (bodies loaded, from
//! memory or from segment files), not the whole queue, so a deep queue
//! costs the leader its index and the window, never every body. New
//! messages go straight to the dispatcher while it has seen everything
//! before them; otherwise the window is topped up from the index as
//! consumers take from it.
//!
//! A body that cannot be read back intact is never served: the queue stops
//! serving on this node, says why, and closes its consumers.

use super::index::Placement;
use super::state_machine::Inner;
use super::types::message_id;
use crate::codec::definitions::condition;
use crate::codec::MessageView;
use crate::paging::Location;
use crate::queue::dispatch::Entry;
use crate::queue::{Message, QueueEventKind};

/// Messages the dispatcher is topped up to.
const WINDOW: usize = 1024;
/// Bytes loaded into the window per top-up at most (at least one message).
const WINDOW_BYTES: u64 = 4 * 1024 * 1024;

/// Which part of the index the dispatcher has seen.
#[derive(Debug, Default)]
pub(crate) struct Feed {
    /// The highest id handed to the dispatcher since this node leads.
    cursor: Option<u64>,
    /// Ids up to this were in the index when this node began leading: an
    /// earlier leader may have delivered them.
    redelivered_upto: Option<u64>,
    /// Why this replica stopped serving the queue (a body it cannot read).
    damaged: Option<String>,
    /// The feed stopped at this message, whose segment was gone at restart:
    /// the log replay is expected to settle it (see `paging`); if it has
    /// not once the log is applied, it is lost (`confirm_missing`).
    waiting_on_missing: Option<u64>,
}

impl Feed {
    /// Whether every message up to `last_id` has been fed.
    pub(crate) fn caught_up(&self, last_id: Option<u64>) -> bool {
        last_id.is_none() || self.cursor >= last_id
    }
}

impl Inner {
    /// This node starts leading with its log up to `last_log_index`: feed
    /// from the start of the index. Every message of that log may have been
    /// delivered by an earlier leader, including those of entries this node
    /// applies only after it began leading (the tail of its log, known
    /// committed once the new term's first entry commits), so the mark is
    /// the log's end, not the index's.
    pub(crate) fn start_feed(&mut self, last_log_index: u64) {
        self.feed.cursor = None;
        let log_end = message_id(last_log_index, usize::from(u16::MAX));
        self.feed.redelivered_upto = Some(log_end).max(self.index.last_id());
    }

    /// This node stops leading.
    pub(crate) fn stop_feed(&mut self) {
        self.feed.cursor = None;
        self.feed.redelivered_upto = None;
        self.feed.waiting_on_missing = None;
    }

    /// Why this replica does not serve the queue, if it does not.
    pub(crate) fn damaged(&self) -> Option<&str> {
        self.feed.damaged.as_deref()
    }

    /// A message just applied, when every earlier one was fed.
    pub(crate) fn feed_new(&mut self, id: u64, message: Message, delivery_count: u32) {
        if self.feed.damaged.is_some() || self.dispatcher.n_ready() >= WINDOW {
            return;
        }
        let mut entry = Entry::new(id, message);
        entry.delivery_count = delivery_count;
        entry.expires_at = self.index.expires_at(id);
        entry.redelivered = self.feed.redelivered_upto.is_some_and(|upto| id <= upto);
        self.feed.cursor = Some(id);
        self.dispatcher.push(entry);
    }

    /// Top the dispatcher's window up from the index (leader only). While
    /// consumers still have credit after taking the window, load the next
    /// one: their credit may exceed the window, and a consumer that settles
    /// nothing until its credit is used would otherwise wait for an event
    /// (a flow, a settlement, an apply) that never comes. What this loads
    /// is bounded by the consumers' credit.
    pub(crate) fn refill(&mut self, queue: &str) {
        loop {
            let cursor = self.feed.cursor;
            self.refill_to(queue, WINDOW);
            let more_wanted =
                self.dispatcher.n_ready() < WINDOW / 2 && self.dispatcher.has_waiting_credit();
            if !more_wanted || self.feed.cursor == cursor {
                return;
            }
        }
    }

    /// Before a drain: load until `want` messages wait (the consumer's
    /// credit, bounded by the link's credit maximum) or the index has no
    /// more, so the drain hands out every message there is, not only the
    /// window.
    pub(crate) fn refill_for_drain(&mut self, queue: &str, want: usize) {
        loop {
            let before = (self.dispatcher.n_ready(), self.feed.cursor);
            if before.0 >= want {
                return;
            }
            self.refill_to(queue, want.max(WINDOW));
            if (self.dispatcher.n_ready(), self.feed.cursor) == before {
                return;
            }
        }
    }

    /// Top the dispatcher up towards `target` waiting messages (at most
    /// `WINDOW_BYTES` read per call).
    fn refill_to(&mut self, queue: &str, target: usize) {
        if !self.leading || self.feed.damaged.is_some() {
            return;
        }
        let ready = self.dispatcher.n_ready();
        if ready >= target / 2 && target == WINDOW || ready >= target {
            return;
        }
        // Bounded by count and by bytes before anything is read.
        let mut slots = self.index.next_after(self.feed.cursor, target - ready);
        let mut bytes = 0u64;
        let keep = slots
            .iter()
            .take_while(|(slot, _)| {
                let first = bytes == 0;
                bytes += u64::from(slot.location.body_bytes);
                first || bytes <= WINDOW_BYTES
            })
            .count();
        slots.truncate(keep);
        let paged: Vec<(Location, u64)> = slots
            .iter()
            .filter(|(s, _)| s.placement == Placement::Paged)
            .map(|(s, _)| (s.location, s.id))
            .collect();
        let mut paged_bodies = match self.store.as_ref() {
            Some(store) => store.read_batch(&paged).into_iter(),
            None => Vec::new().into_iter(),
        };
        for (slot, resident) in slots {
            let body = match slot.placement {
                Placement::Resident => {
                    resident.ok_or_else(|| "resident body not in memory".to_string())
                }
                Placement::Paged => match paged_bodies.next() {
                    Some(read) => read.map_err(|e| e.to_string()),
                    None => Err("segment store not open".to_string()),
                },
                Placement::Missing => {
                    // Not an error yet: wait for the log replay.
                    self.feed.waiting_on_missing = Some(slot.id);
                    return;
                }
                Placement::Dead => Err("it was removed".to_string()),
            };
            let message = body.and_then(|bytes| {
                let view = MessageView::scan(&bytes).map_err(|e| e.to_string())?;
                Ok(Message {
                    header: view.header,
                    header_len: view.header_len as u32,
                    bytes,
                })
            });
            let message = match message {
                Ok(message) => message,
                Err(reason) => {
                    self.damage(queue, slot.id, reason);
                    return;
                }
            };
            let mut entry = Entry::new(slot.id, message);
            entry.delivery_count = slot.delivery_count;
            entry.expires_at = self.index.expires_at(slot.id);
            entry.redelivered = self
                .feed
                .redelivered_upto
                .is_some_and(|upto| slot.id <= upto);
            self.feed.cursor = Some(slot.id);
            self.dispatcher.push(entry);
        }
    }

    /// Called as the log applies: if the feed waits at a message whose
    /// segment was gone at restart and the whole log is applied
    /// (`log_applied`) without settling it, its body is lost: stop serving.
    pub(crate) fn confirm_missing(&mut self, queue: &str, log_applied: bool) {
        let Some(id) = self.feed.waiting_on_missing else {
            return;
        };
        match self.index.get(id) {
            Some(slot) if slot.placement == Placement::Missing => {
                if log_applied && self.feed.damaged.is_none() {
                    let reason =
                        "its segment file was gone at restart and the log did not settle it";
                    self.damage(queue, id, reason.to_string());
                }
            }
            _ => {
                self.feed.waiting_on_missing = None;
                self.refill(queue);
            }
        }
    }

    /// Stop serving the queue here: message `id` cannot be read back.
    fn damage(&mut self, queue: &str, id: u64, reason: String) {
        tracing::error!(
            %queue, id, %reason,
            "quorum queue: a message body cannot be read back intact; \
             this replica stops serving the queue"
        );
        let description = format!("{queue}: message {id} cannot be read on this node: {reason}");
        self.feed.damaged = Some(description.clone());
        for consumer in self.dispatcher.clear() {
            self.routed.remove(&consumer.id);
            consumer.sink.send(
                consumer.tag,
                QueueEventKind::Closed {
                    condition: condition::INTERNAL_ERROR,
                    description: description.clone(),
                },
            );
        }
    }
}
