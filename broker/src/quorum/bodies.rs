//! Where a replica keeps each message body as entries apply: in memory
//! while the queue and the node are within their resident budgets (and
//! only on the leader, the one replica that delivers), otherwise appended
//! to the replica's segment files; and how a settlement gives the memory
//! or the segment record back.
//!
//! It must not know about consumers beyond handing new messages to the
//! feed, or about snapshots.

use bytes::Bytes;

use super::index::{Placement, Slot};
use super::state_machine::{BodyLimits, Inner};
use super::types::SettleKind;
use crate::codec::dead_letter::dead_letter_key;
use crate::codec::MessageView;
use crate::paging::{Location, StoreError};
use crate::queue::Message;

/// Why an entry could not be applied; fatal for the group (openraft stops
/// it), since the replica no longer matches its log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApplyError {
    #[error("segment store: {0}")]
    Store(#[from] StoreError),
    #[error("segment store not open")]
    NotOpen,
}

impl Inner {
    /// Apply one published message with id `id`.
    pub(crate) fn enqueue(
        &mut self,
        limits: &BodyLimits,
        id: u64,
        bytes: Bytes,
    ) -> Result<(), ApplyError> {
        self.enqueue_expiring(limits, id, bytes, 0)
    }

    /// Apply one replicated publish that expires at `expires_at` (ms since
    /// the epoch, 0: never), as the leader stamped it.
    pub(crate) fn enqueue_expiring(
        &mut self,
        limits: &BodyLimits,
        id: u64,
        bytes: Bytes,
        expires_at: u64,
    ) -> Result<(), ApplyError> {
        // A second send of one dead-lettering (`dead_letters.rs`): taken
        // once. A few byte comparisons for any other message.
        if let Some(key) = dead_letter_key(&bytes) {
            if !self.index.dead_letters_mut().first_time(key) {
                return Ok(());
            }
        }
        // The leader checked the message before proposing it; this only
        // guards a replay of a log written by an older version.
        let Ok(view) = MessageView::scan(&bytes) else {
            return Ok(());
        };
        self.published_total += 1;
        let delivery_count = view.header.as_ref().map_or(0, |h| h.delivery_count);
        let len = bytes.len() as u64;
        let caught_up = self.feed.caught_up(self.index.last_id());
        let resident = self.leading
            && self.index.resident_bytes() + len <= limits.queue_bytes
            && limits.node.try_take(len);
        let (slot, body) = if resident {
            // A copy, so the body does not pin the buffer it came in.
            let body = Bytes::copy_from_slice(&bytes);
            let location = Location {
                segment: 0,
                offset: 0,
                body_bytes: len as u32,
                ordinal: 0,
            };
            let slot = Slot {
                id,
                location,
                delivery_count,
                placement: Placement::Resident,
            };
            (slot, Some(body))
        } else {
            let store = self.store.as_mut().ok_or(ApplyError::NotOpen)?;
            let location = store.append(id, &bytes)?;
            self.growth.paged();
            let slot = Slot {
                id,
                location,
                delivery_count,
                placement: Placement::Paged,
            };
            (slot, None)
        };
        let message = Message {
            bytes: body.clone().unwrap_or(bytes),
            header: view.header,
            header_len: view.header_len as u32,
        };
        self.index.push(slot, body);
        self.index.set_expiry(id, expires_at);
        if self.leading && caught_up {
            self.feed_new(id, message, delivery_count);
        }
        Ok(())
    }

    /// Apply one replicated settlement of message `id`.
    pub(crate) fn settle(
        &mut self,
        limits: &BodyLimits,
        id: u64,
        kind: SettleKind,
    ) -> Result<(), ApplyError> {
        match kind {
            SettleKind::Remove => {
                self.index.dead_letters_mut().remove(id);
                if let Some((slot, body)) = self.index.remove(id) {
                    match slot.placement {
                        Placement::Resident => {
                            limits.node.give_back(body.map_or(0, |b| b.len() as u64))
                        }
                        Placement::Paged => {
                            let store = self.store.as_mut().ok_or(ApplyError::NotOpen)?;
                            store.release(slot.location)?;
                        }
                        Placement::Missing | Placement::Dead => {}
                    }
                }
                if self.leading {
                    self.dispatcher.remove(id);
                }
            }
            SettleKind::Failed => {
                let count = self.index.fail(id);
                // The dispatcher may have been rebuilt from the index
                // before this entry applied (a restarted leader applies its
                // log tail after it leads): it must not hand the message
                // out with a delivery-count below the replicated one.
                if let (true, Some(count)) = (self.leading, count) {
                    self.dispatcher.raise_delivery_count(id, count);
                }
            }
        }
        Ok(())
    }
}
