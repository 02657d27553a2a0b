//! Messages a quorum queue removes without a consumer's settlement:
//! expired (`queue/expiry.rs`) or dropped from the head for its policy's
//! length limit (overflow drop-head).
//!
//! The leader decides: its sweep (once a second while the queue is on the
//! node's sweep list, `sweep_list.rs` and `node/expiry_sweep.rs`, and at
//! once when an apply left the queue past its drop-head limit)
//! takes the expired messages its dispatcher set aside and those at the
//! head of the index whose stamped expiry has passed, and under drop-head
//! the oldest messages not out with a consumer while the queue is past its
//! limit; it takes them out of its dispatcher at once (never delivered)
//! and proposes `Command::Discard { ids, reason }`. Every replica applies
//! that entry through [`Inner::discard`], the one place where such
//! messages leave a quorum queue (and where they are dead-lettered), so
//! all replicas remove the same messages whatever their own clocks and
//! policies say. A leader change before the entry commits loses nothing:
//! the new leader's sweep decides again.

use super::bodies::ApplyError;
use super::queue::QuorumQueue;
use super::settle_batcher::SettleMsg;
use super::state_machine::{BodyLimits, Inner};
use super::types::SettleKind;
use crate::queue::dead_letter::DeathReason;
use crate::queue::expiry::{self, SWEEP_MAX};
use crate::queue::MessageId;

impl Inner {
    /// Apply a replicated discard: remove `ids` as a settlement would.
    pub(crate) fn discard(
        &mut self,
        limits: &BodyLimits,
        ids: &[u64],
        reason: DeathReason,
    ) -> Result<(), ApplyError> {
        tracing::trace!(
            queue_ids = ids.len(),
            reason = reason.as_str(),
            "messages discarded"
        );
        for &id in ids {
            self.settle(limits, id, SettleKind::Remove)?;
        }
        Ok(())
    }

    /// Whether the queue is past its drop-head limit (the leader then asks
    /// for a sweep at once). Choosing again before the discard applied
    /// picks the same oldest messages: a repeated discard is harmless.
    pub(crate) fn past_drop_head_limit(&self) -> bool {
        self.dispatcher.policy().is_some_and(|p| {
            p.drops_head() && p.over_limit(self.index.len() as u64, self.index.bytes())
        })
    }

    /// The leader's choice: the messages to discard now, and why (expired
    /// ones first), each taken out of the dispatcher.
    fn choose_discards(&mut self) -> Vec<(Vec<MessageId>, DeathReason)> {
        let mut chosen = Vec::new();
        let now = expiry::now_ms();
        let mut expired: Vec<MessageId> = self
            .dispatcher
            .take_expired()
            .into_iter()
            .map(|e| e.id)
            .collect();
        if self.index.has_expiries() {
            for slot in self.index.iter() {
                if expired.len() >= SWEEP_MAX {
                    break;
                }
                // The dead-letter outbox left the queue already.
                if self.dispatcher.is_out(slot.id) || self.index.dead_letters().in_outbox(slot.id) {
                    continue;
                }
                if !expiry::has_passed(self.index.expires_at(slot.id), now) {
                    break;
                }
                expired.push(slot.id);
            }
        }
        for &id in &expired {
            self.dispatcher.remove(id);
        }
        let outbox = self.index.dead_letters().outbox_len() as u64;
        let (mut held, mut bytes) = (
            (self.index.len() as u64).saturating_sub(outbox),
            self.index.bytes(),
        );
        for &id in &expired {
            if let Some(slot) = self.index.get(id) {
                held -= 1;
                bytes -= u64::from(slot.location.body_bytes);
            }
        }
        if !expired.is_empty() {
            chosen.push((expired.clone(), DeathReason::Expired));
        }
        let Some(policy) = self.dispatcher.policy().filter(|p| p.drops_head()).cloned() else {
            return chosen;
        };
        let mut dropped = Vec::new();
        for slot in self.index.iter() {
            if !policy.over_limit(held, bytes) || dropped.len() >= SWEEP_MAX {
                break;
            }
            if self.dispatcher.is_out(slot.id)
                || expired.contains(&slot.id)
                || self.index.dead_letters().in_outbox(slot.id)
            {
                continue;
            }
            held -= 1;
            bytes -= u64::from(slot.location.body_bytes);
            dropped.push(slot.id);
        }
        for &id in &dropped {
            self.dispatcher.remove(id);
        }
        if !dropped.is_empty() {
            chosen.push((dropped, DeathReason::Maxlen));
        }
        chosen
    }
}

impl QuorumQueue {
    /// The node's sweep reached this queue: when this node leads it,
    /// discard what has expired and, under drop-head, what is past the
    /// length limit, through the log; on any replica, give back what an
    /// idle, empty queue holds (`idle_shed.rs`). One with nothing of the
    /// kind left leaves the sweep list (`sweep_list.rs`).
    pub(crate) fn sweep_expired(&self) {
        let chosen = {
            let mut inner = self.shared.lock();
            inner.shed_when_idle(&self.shared.queue, tokio::time::Instant::now());
            if super::sweep_list::unlist_if_done(&self.shared, &mut inner)
                || inner.damaged().is_some()
                || !inner.wants_sweep()
            {
                return;
            }
            let chosen = inner.choose_discards();
            if !chosen.is_empty() {
                inner.refill(&self.shared.queue);
            }
            chosen
        };
        // With a dead-letter address they are dead-lettered (the outbox,
        // `dead_letter_outbox.rs`), else dropped.
        let dead = !chosen.is_empty() && self.dead_letters_on();
        for (ids, reason) in chosen {
            if dead {
                for id in ids {
                    let _ = self.send_settle(SettleMsg::DeadLetter(id, reason));
                }
            } else {
                let _ = self.send_settle(SettleMsg::Discard(ids, reason));
            }
        }
    }
}
