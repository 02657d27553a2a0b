//! Dead-lettering from a quorum queue, at least once and through the Raft
//! log:
//!
//! 1. The leader decides (a rejection, the delivery limit; a consumer
//!    going away counts a failure, `QuorumQueue::abandoned`) and proposes
//!    `Command::DeadLetter { ids, salt }` (batched with the settlements).
//! 2. Applying it moves the messages to the outbox (`dead_letters.rs`) on
//!    every replica: still in the index with their bodies, never served.
//! 3. The leader's sender task (here) reads each body, writes the death
//!    annotations and the key `(salt, id)` into a copy, and publishes it
//!    to the policy's dead-letter address through the node's
//!    `DeadLetterRouter` (as a client publish goes: any node, any kind of
//!    queue), with a confirm.
//! 4. Once the dead-letter queue reports `accepted` (a quorum one: its
//!    entry committed), the leader proposes `Command::DeadLettered`, which
//!    removes the messages everywhere.
//!
//! A new leader sends its whole outbox again; a quorum dead-letter queue
//! takes each key once (`dead_letters.rs`), so a dead-lettering lands
//! there exactly once. A transient dead-letter queue has no such memory:
//! a second send after a leader change may land twice there. A copy not
//! confirmed within [`RESEND_AFTER`] is sent again.
//!
//! It knows the dead-letter queue only as an address handed to the router.

use openraft::alias::WatchReceiverOf;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::metrics::RaftServerMetrics;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::bodies::ApplyError;
use super::dead_letters::{key, Outgoing};
use super::hold::ProposalHold;
use super::index::Placement;
use super::node::QuorumNode;
use super::queue::QuorumQueue;
use super::settle_batcher::SettleMsg;
use super::state_machine::{BodyLimits, Inner, Shared};
use super::types::{Command, QueueRaft, QueueRaftHandle, SettleKind};
use crate::codec::MessageView;
use crate::queue::dead_letter::{dead_letter_copy, now_ms, DeathReason, SharedRouter};
use crate::queue::dispatch::Entry;
use crate::queue::{
    Message, MessageId, Outcome, PublishConfirm, QueueAddress, QueueEvent, QueueEventKind, Sink,
};

/// A copy not confirmed after this is sent again.
pub(crate) const RESEND_AFTER: Duration = Duration::from_secs(10);
/// Copies sent per round at most (bodies read under the queue's lock).
const SEND_BATCH_MAX: usize = 256;
/// How often the sender looks without being woken (a new leadership).
const TICK: Duration = Duration::from_millis(250);

impl Inner {
    /// Apply `Command::DeadLetter`: the live messages among `ids` move to
    /// the outbox. Whether any did.
    pub(crate) fn dead_letter(&mut self, ids: &[(u64, DeathReason)], salt: u64) -> bool {
        let mut any = false;
        for &(id, reason) in ids {
            if !self.index.contains(id) {
                continue;
            }
            let outgoing = Outgoing {
                reason,
                key: key(salt, id),
            };
            self.index.dead_letters_mut().add(id, outgoing);
            if self.leading {
                // A leader that did not decide it (it came after) may hold it.
                self.dispatcher.remove(id);
            }
            any = true;
        }
        any
    }

    /// Apply `Command::DeadLettered`: the outbox messages among `ids`
    /// leave the queue.
    pub(crate) fn dead_lettered(
        &mut self,
        limits: &BodyLimits,
        ids: &[u64],
    ) -> Result<(), ApplyError> {
        for &id in ids {
            if self.index.dead_letters().in_outbox(id) {
                self.settle(limits, id, SettleKind::Remove)?;
            }
        }
        Ok(())
    }
}

impl QuorumQueue {
    /// Whether the queue's policy names a dead-letter address.
    pub(super) fn dead_letters_on(&self) -> bool {
        self.shared
            .lock()
            .dispatcher
            .policy()
            .is_some_and(|p| p.dead_letter_address.is_some())
    }

    /// A consumer went away without settling the messages `counted` (each
    /// counted one failed delivery); `over` reached the delivery limit and
    /// left the dispatcher. Replicate both.
    pub(super) fn abandoned(&self, counted: Vec<MessageId>, over: Vec<Entry>) {
        if counted.is_empty() {
            return;
        }
        let dead = !over.is_empty() && self.dead_letters_on();
        for id in counted {
            let message = if over.iter().any(|e| e.id == id) {
                if dead {
                    SettleMsg::DeadLetter(id, DeathReason::DeliveryLimit)
                } else {
                    SettleMsg::Settle(id, SettleKind::Remove)
                }
            } else {
                SettleMsg::Settle(id, SettleKind::Failed)
            };
            let _ = self.send_settle(message);
        }
    }
}

impl QuorumNode {
    /// Hand in the router every group publishes dead-lettered copies
    /// through (once `node/` made it; groups opened before read it then).
    pub(crate) fn attach_dead_letter_router(&self, router: SharedRouter) {
        let _ = self.dead_letter_router.set(router);
    }
}

/// What one round of the sender found to send.
struct Due {
    target: Option<QueueAddress>,
    copies: Vec<(u64, Outgoing, Bytes)>,
}

/// What the leadership watch (`leadership_watch.rs`) needs to start the
/// sender the first time the outbox gets an entry: most queues never
/// dead-letter, and a task per replica waiting for that cost every
/// replica of every group ~0.45 KiB (its event channel, timer and
/// in-flight sends, a few KiB, would come on top if it ran from the start).
pub(super) struct DeadLetterStart {
    pub(super) hold: Arc<ProposalHold>,
    pub(super) address: QueueAddress,
}

impl DeadLetterStart {
    /// Starts the sender if the outbox has an entry; `start` is left
    /// `None` once it ran. The sender ends when the Raft group shuts down.
    pub(super) fn start_if_wanted(
        start: &mut Option<DeadLetterStart>,
        raft: &QueueRaftHandle,
        shared: &Arc<Shared>,
    ) {
        if start.is_none() || shared.lock().index.dead_letters().outbox_len() == 0 {
            return;
        }
        if let Some(DeadLetterStart { hold, address }) = start.take() {
            let metrics = raft.server_metrics();
            tokio::spawn(sender(raft.clone(), shared.clone(), hold, address, metrics));
        }
    }
}

/// The sender once the outbox had an entry.
async fn sender(
    raft: QueueRaftHandle,
    shared: Arc<Shared>,
    hold: Arc<ProposalHold>,
    address: QueueAddress,
    mut metrics: WatchReceiverOf<QueueRaft, RaftServerMetrics<QueueRaft>>,
) {
    let (sink, mut events) = Sink::channel();
    let mut in_flight: HashMap<u64, Instant> = HashMap::new();
    let mut confirmed: Vec<u64> = Vec::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Nothing in the outbox and nothing in flight: nothing to look at
        // until the outbox gets an entry (`dead_letter_wake`) or the
        // leadership changes (the metrics below). The tick ran for every
        // replica of every group four times a second: 12% of the idle CPU
        // of 300 groups on three in-process nodes, once openraft's own
        // ticks were gone (`follower_tick.rs`).
        let idle = in_flight.is_empty() && shared.lock().index.dead_letters().outbox_len() == 0;
        tokio::select! {
            _ = tick.tick(), if !idle => {}
            _ = shared.dead_letter_wake.notified() => {}
            event = events.recv() => {
                if let Some(event) = event {
                    confirm(event, &mut in_flight, &mut confirmed);
                }
            }
            changed = metrics.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        while let Ok(event) = events.try_recv() {
            confirm(event, &mut in_flight, &mut confirmed);
        }
        if !confirmed.is_empty() {
            let ids = std::mem::take(&mut confirmed);
            let Some(pass) = hold.pass().await else {
                return;
            };
            super::submit::lease_acknowledged(&raft).await;
            let written = raft.client_write(Command::DeadLettered { ids }).await;
            drop(pass);
            if let Err(error) = written {
                // Still in the outbox: sent again (and taken once).
                tracing::debug!(queue = %address, %error, "dead-lettered not recorded");
            }
        }
        let Some(due) = due(&shared, &mut in_flight) else {
            continue;
        };
        send(
            &shared,
            &address,
            &sink,
            due,
            &mut in_flight,
            &mut confirmed,
        );
    }
}

fn confirm(event: QueueEvent, in_flight: &mut HashMap<u64, Instant>, confirmed: &mut Vec<u64>) {
    if let QueueEventKind::Published { token, outcome } = event.kind {
        if in_flight.remove(&token).is_some() && outcome == Outcome::Accepted {
            confirmed.push(token);
        }
    }
}

/// The outbox messages to send now, with their bodies (leader only).
fn due(shared: &Shared, in_flight: &mut HashMap<u64, Instant>) -> Option<Due> {
    let mut guard = shared.lock();
    let inner = &mut *guard;
    if !inner.leading || inner.deleted {
        in_flight.clear();
        return None;
    }
    if inner.index.dead_letters().outbox_len() == 0 {
        return None;
    }
    let now = Instant::now();
    in_flight.retain(|_, since| now.duration_since(*since) < RESEND_AFTER);
    let target = inner
        .dispatcher
        .policy()
        .and_then(|p| p.dead_letter_address.clone());
    let outgoing: Vec<(u64, Outgoing)> = inner
        .index
        .dead_letters()
        .outbox()
        .filter(|(id, _)| !in_flight.contains_key(id))
        .take(SEND_BATCH_MAX)
        .collect();
    let mut paged = Vec::new();
    let mut copies = Vec::new();
    for (id, o) in outgoing {
        match inner.index.get(id) {
            Some(slot) if slot.placement == Placement::Resident => {
                if let Some(body) = inner.index.resident_body(id) {
                    copies.push((id, o, body));
                }
            }
            Some(slot) if slot.placement == Placement::Paged => paged.push((slot.location, id, o)),
            // A body lost at restart waits for the log replay.
            _ => {}
        }
    }
    if let Some(store) = inner.store.as_ref() {
        let wanted: Vec<_> = paged.iter().map(|(l, id, _)| (*l, *id)).collect();
        for ((_, id, o), read) in paged.iter().zip(store.read_batch(&wanted)) {
            match read {
                Ok(body) => copies.push((*id, *o, body)),
                Err(error) => {
                    tracing::warn!(queue = %shared.queue, id, %error, "dead-lettering: body not readable");
                }
            }
        }
    }
    Some(Due { target, copies })
}

/// Publish each copy (or drop it: no dead-letter address any more, a
/// cycle, not a message).
fn send(
    shared: &Shared,
    address: &QueueAddress,
    sink: &Sink,
    due: Due,
    in_flight: &mut HashMap<u64, Instant>,
    confirmed: &mut Vec<u64>,
) {
    let Some(router) = shared.dead_letter_router.get() else {
        return;
    };
    let time_ms = now_ms();
    for (id, outgoing, bytes) in due.copies {
        let Some(target) = due.target.as_ref() else {
            // The policy lost its dead-letter address: dropped.
            confirmed.push(id);
            continue;
        };
        let copy = MessageView::scan(&bytes).ok().and_then(|view| {
            let message = Message {
                header: view.header,
                header_len: view.header_len as u32,
                bytes,
            };
            dead_letter_copy(
                &message,
                address,
                target,
                outgoing.reason,
                time_ms,
                Some(outgoing.key),
            )
        });
        let Some(copy) = copy else {
            confirmed.push(id);
            continue;
        };
        in_flight.insert(id, Instant::now());
        let confirm = PublishConfirm {
            sink: sink.clone(),
            tag: 0,
            token: id,
        };
        router.publish(target.clone(), copy, Some(confirm));
    }
}
